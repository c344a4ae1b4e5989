"""JAX (Flax NNX): the ways real code builds a layer (the ``construction`` check).

PYTEST_DONT_REWRITE: pytest rewrites an entry-point plugin's modules on import; this one is imported lazily,
deep in a check's stack, where CPython 3.11.7's ast.parse can fail with 'AST constructor recursion depth
mismatch'. It holds no assert that rewriting would serve."""
from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ...protocol import NotApplicable
from ...protocol.construction import ConstructionPart, ConstructionProtocol
from ...protocol.core import import_spec
from .core import _value


def _seeded(layer) -> dict:
    """Every nnx.Variable of the module, its RNG streams (nnx.RngState) included: what a seed makes."""
    return {".".join(map(str, path)): v for path, v in nnx.iter_graph(layer) if isinstance(v, nnx.Variable)}


def _takes_rngs(factory) -> bool:
    """Whether the constructor takes an ``rngs`` argument (``construct`` passes one)."""
    try:
        params = inspect.signature(factory.__init__ if inspect.isclass(factory) else factory).parameters
    except (TypeError, ValueError):
        return False
    return "rngs" in params


def _seed_value(v) -> np.ndarray:
    """A variable's value as numpy; a typed PRNG key as its key data."""
    x = _value(v)
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        x = jax.random.key_data(x)
    return np.asarray(x)


class JaxConstruction(ConstructionProtocol):
    # -- construction: the ways real code builds a layer (the construction check) ---------------------------
    def construction_run(self, impl, constructor, inputs, expected, other=None):
        impl = import_spec(impl) if isinstance(impl, str) else impl
        plain = self.construct(impl, constructor)
        if not isinstance(plain, nnx.Module):
            raise NotApplicable(f"the constructor makes a {type(plain).__name__}, not an nnx.Module: no state for "
                                f"nnx.eval_shape to describe or a seed to repeat", code="not_a_module")
        # RNG streams (nnx.RngState) too: left out of the saved state, but made from the seed like the rest
        real = {n: (tuple(jnp.shape(_value(v))), str(_value(v).dtype)) for n, v in _seeded(plain).items()}
        if not real:
            raise NotApplicable("the module holds no nnx.Variable: no state for nnx.eval_shape to describe or a seed "
                                "to repeat", code="no_state")
        part = "nnx.eval_shape(lambda: Layer(...))"
        problems, hint = [], None
        try:
            abstract = nnx.eval_shape(lambda: self.construct(impl, constructor))
        except Exception as exc:
            problems.append(f"constructing the layer under nnx.eval_shape raised {type(exc).__name__}: "
                            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}")
            hint = "construction_reads_in_init"
        else:
            raw = [getattr(v, "get_raw_value", None) for v in _seeded(abstract).values()]
            got = {n: (tuple(a.shape), str(a.dtype)) for n, a in
                   ((n, r() if r else getattr(v, "raw_value", v)) for (n, v), r in
                    zip(_seeded(abstract).items(), raw))}
            for n in sorted(set(real) | set(got)):
                if n not in got:
                    problems.append(f"{n!r} is missing from the abstract state")
                elif n not in real:
                    problems.append(f"{n!r} is in the abstract state only")
                elif got[n] != real[n]:
                    problems.append(f"{n!r} is {list(got[n][0])} {got[n][1]} abstractly, {list(real[n][0])} "
                                    f"{real[n][1]} when built")
        parts = [ConstructionPart(part=part, problems=tuple(problems), hint=hint)]
        part = "two constructions with the same nnx.Rngs seed"
        twin = self.construct(impl, constructor)
        values = {n: _seed_value(v) for n, v in _seeded(twin).items()}
        made = _seeded(plain)
        differ = [n for n, v in made.items() if n in values and
                  not np.array_equal(_seed_value(v), values[n], equal_nan=True)]
        streams = [n for n in differ if isinstance(made[n], nnx.RngState)]
        fix = "; ".join((["draw every random value from rngs (rngs.params())"] if len(streams) < len(differ) else [])
                        + (["fork each RNG stream from the rngs given (rngs.dropout.fork()), not from a new "
                            "nnx.Rngs seeded elsewhere"] if streams else []))
        problems = [f"{', '.join(map(repr, differ))} {'differs' if len(differ) == 1 else 'differ'} between two "
                    f"constructions with nnx.Rngs(0){' (RNG stream state)' if streams else ''}: the constructor "
                    f"draws from a source other than the nnx.Rngs it is given (numpy or Python's random, the time, "
                    f"a global counter); {fix}"] if differ else []
        parts.append(ConstructionPart(part=part, problems=tuple(problems), hint=None))
        if _takes_rngs(impl):
            parts.append(self._another_seed(impl, constructor, made, values))
        return parts

    def _another_seed(self, impl, constructor, made, values) -> ConstructionPart:
        """A third construction, with nnx.Rngs(1): a constructor that takes rngs and draws from a seed of its own
        (nnx.Rngs(0) inside) makes the same RNG streams and random parameters whatever seed it is given."""
        reseeded = self.construct(impl, {**constructor, "rngs": nnx.Rngs(1)})
        other = {n: _seed_value(v) for n, v in _seeded(reseeded).items()}
        same = [n for n in values if n in other and np.array_equal(values[n], other[n], equal_nan=True)]
        streams = [n for n, v in made.items() if isinstance(v, nnx.RngState)]
        drawn = [n for n, v in made.items() if isinstance(v, nnx.Param) and np.size(values.get(n, ())) > 1
                 and np.ptp(np.asarray(values[n], dtype=np.float64)) > 0]   # non-constant: drawn, not filled
        stuck = ([n for n in streams if n in same] if streams and all(n in same for n in streams) else []) \
            + ([n for n in drawn if n in same] if drawn and all(n in same for n in drawn) else [])
        problems = [f"{', '.join(map(repr, stuck))} {'is' if len(stuck) == 1 else 'are'} the same under nnx.Rngs(0) "
                    f"and nnx.Rngs(1): the constructor takes rngs and ignores the seed it is given (it draws from an "
                    f"nnx.Rngs of its own, or a fixed key); draw every random value, and fork every RNG stream, from "
                    f"the rngs given"] if stuck else []
        return ConstructionPart(part="a construction with another nnx.Rngs seed", problems=tuple(problems), hint=None)
