"""The ways real code builds a layer: ``construction``.

A layer is built in the harness's other checks one way: constructed, then called once. Real code builds it
other ways, and a custom layer often breaks there (issue 32):
- torch: factory keyword arguments (``device=``, ``dtype=``), where the constructor takes them, must place
  every parameter and buffer; construction under ``torch.device("meta")``, ``to_empty(device="cpu")`` and
  ``reset_parameters`` (how large models are loaded) must give a plain build's state;
- Keras: ``build(input_shape)`` alone must make the contract's weights, before any call;
  ``compute_output_shape``, where the layer defines it, must work unbuilt (whether its shape is right is
  ``abstract``'s);
- JAX/NNX: ``nnx.eval_shape(lambda: Layer(...))`` must give the state's shapes, two constructions with the
  same ``nnx.Rngs`` seed must be equal, RNG streams (``nnx.RngState``) included, and a third with another seed
  must differ in its RNG streams and drawn (non-constant) parameters, where it takes ``rngs``;
- MXNet Gluon: deferred initialisation (``initialize()`` before the shapes are known) must give a plain build's
  state after a first call on another case's inputs (of another rank where a case has one): the shapes it
  infers must not depend on which batch comes first (``hybridize()`` is ``compiled``'s).
The adapter builds the layer each way in the layer's executor and says what differs (``construction_run``); a
way the framework or the layer lacks is n/a, with its reason. Once per target (a dtype changes no
constructor): a few constructions, no extra process.
"""
from __future__ import annotations

from ..record import NotApplicable
from .base import CheckFailed
from .mistakes import hint


def check_construction(ctx):
    contract = ctx.contract  # applicable: a layer contract without construction: {not_applicable}
    expected = {"trainable": len(contract.trainable), "non_trainable": len(contract.non_trainable),
                "reset_parameters": contract.construction.reset_parameters}
    first = ctx.build_inputs()
    parts = ctx.adapter.construction_run(ctx.impl, ctx.constructor_args(), first, expected,
                                         other=_other_first_call(ctx, first))
    details, problems, hints, ran = {}, [], [], False
    for part in parts:
        name = part.part
        if part.not_applicable:
            details[name] = str(part.not_applicable)
            continue
        ran = True
        if part.problems:
            details[name] = "failed"
            problems.append(f"{name}: " + "; ".join(part.problems))
            if part.hint and part.hint not in hints:
                hints.append(part.hint)
        else:
            details[name] = "passed"
    if problems:
        said = [hint(h, ctx.adapter.name) for h in hints]
        raise CheckFailed("; ".join(problems).rstrip(".") + "".join(f". {s}" for s in said if s), **details)
    if not ran:
        raise NotApplicable("; ".join(f"{p.part}: {p.not_applicable.reason}" for p in parts), code="parts")
    return details


def _other_first_call(ctx, first):
    """Another case's inputs, for a first call that must infer the state a first call on ``first`` does: the
    first case whose input shapes differ from ``first``'s, of another rank where one is; None where every case
    has ``first``'s shapes."""
    shapes = [tuple(a.shape) for a in first]
    differ = []
    for case in ctx.contract.cases[1:]:
        inputs = ctx.case_inputs(case)
        if [tuple(a.shape) for a in inputs] != shapes:
            differ.append(inputs)
    rank = [xs for xs in differ if [a.ndim for a in xs] != [a.ndim for a in first]]
    return (rank or differ or [None])[0]
