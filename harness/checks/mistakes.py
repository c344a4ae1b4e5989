"""Every hint the harness prints, in one table, and the known mistakes recognized by the shape of an error.

A hint is the sentence after a failure that says what the mistake probably is and how to fix it. Each has
a stable id, the checks that print it, the condition under which they do, and its text (per framework where
the fix is said in the framework's words). Checks take their hint texts from here (``hint``), so that
tests/test_hints.py can run, for every id, a mutant that must get the hint and a near miss that must not.

Known mistakes: when ``values`` fails, the layer's outputs are compared with each applicable variant below,
the reference with one known mistake made on purpose; where every case matches a variant to the values
tolerance (and the variant differs from the reference somewhere), the failure names the mistake.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..compare import describe_mismatch
from ..dtypes import is_floating
from ..check_catalog import PER_DTYPE
from ..reference_run import reference


@dataclass(frozen=True)
class Hint:
    id: str
    checks: tuple              # the checks that print it
    when: str                  # the condition, in words
    text: str = ""             # the text where it is the same in every framework ({fw}: the framework); with
                               # by_framework, the words of the frameworks it does not name (none: '')
    by_framework: dict = field(default_factory=dict)  # framework -> text, where the fix differs

    def render(self, framework: str | None = None, **values) -> str:
        """The text for ``framework`` ('' where it has none), with ``values`` filled in."""
        text = self.by_framework.get(framework, self.text) if self.by_framework else self.text
        return text.format(fw=framework or "the framework", **values)


_STATE = ("parameters", "buffers")
_NUMERIC = PER_DTYPE  # the checks that compare numbers in each dtype
HINTS: dict[str, Hint] = {h.id: h for h in (
    # --- how state is registered: parameters, buffers -----------------------------------------------
    Hint("register_trainable", ("parameters",),
         "a trainable slot is held as a tensor attribute the framework does not track",
         by_framework={
             "torch": "wrap it in nn.Parameter (a plain tensor is not registered; in a list or dict, hold "
                      "the nn.Parameters in nn.ParameterList or nn.ParameterDict)",
             "tensorflow": "create it with self.add_weight(...) in build() (a raw tf.Variable or tensor "
                           "attribute, or one in a plain list, is invisible to Keras)",
             "jax": "wrap it in nnx.Param (a raw jax array is not a Variable: nnx.grad and "
                    "nnx.Optimizer(wrt=nnx.Param) skip it)",
             "mxnet": "on 1.9.1 only the block's own ParameterDict registers a parameter (an NDArray attribute, "
                      "a gluon.Parameter assigned as an attribute in the 2.0 style or one kept in a list is not in "
                      "collect_params()): create it in __init__ with `self.{slot} = self.params.get('{slot}', "
                      "shape={shape}, init=...)`",
         }),
    Hint("register_in_container", ("parameters",),
         "a trainable slot is already the framework's parameter type, but held in a plain Python list or dict "
         "that the framework does not look into",
         by_framework={
             "torch": "it is already an nn.Parameter, but a plain Python list or dict hides it from the module: "
                      "hold it in nn.ParameterList (a dict of them in nn.ParameterDict)",
         }),
    Hint("make_trainable", ("parameters",),
         "a trainable slot is registered, but as non-trainable state",
         by_framework={
             "torch": "it is a buffer: register it as nn.Parameter instead",
             "tensorflow": "it is created with add_weight(trainable=False) (or its .trainable was switched off): "
                           "create it with trainable=True, the default",
             "jax": "it is held in a non-Param nnx.Variable: hold it in nnx.Param",
             "mxnet": "it is a Constant or has grad_req 'null': create it with self.params.get(name, "
                      "shape=..., init=...) (grad_req 'write')",
         }),
    Hint("counted_as_trainable", _STATE,
         "a non-trainable slot is registered as trainable: what that does, in the framework's terms (not "
         "'it is trained': with requires_grad=False it is not, but it is still a parameter)",
         by_framework={
             "torch": "as an nn.Parameter it is counted in parameters(), handed to any optimizer built from "
                      "them, saved and loaded as a weight, and model.requires_grad_(True) (as before "
                      "fine-tuning) starts training it",
             "tensorflow": "it is in trainable_weights, so fit() and any optimizer given them update it",
             "jax": "as an nnx.Param, nnx.grad differentiates it and nnx.Optimizer(wrt=nnx.Param) updates it",
             "mxnet": "its grad_req is not 'null', so a gluon.Trainer over collect_params() updates it",
         }),
    Hint("register_buffer", _STATE,
         "a non-trainable slot is registered as trainable, held as a plain attribute, or missing",
         by_framework={
             "torch": "use self.register_buffer(name, tensor)",
             "tensorflow": "create it with self.add_weight(..., trainable=False)",
             "jax": "hold it in a non-Param nnx.Variable subclass, e.g. class Buffer(nnx.Variable)",
             "mxnet": "use self.params.get_constant(name, value) (a Constant, grad_req 'null')",
         }),
    # Keras's get_weights() holds every weight, so a registered weight is always saved there
    Hint("not_persistent", ("buffers",),
         "a non-trainable slot is registered but left out of the saved state",
         by_framework={
             "torch": "a buffer registered with persistent=False is left out of state_dict",
             "mxnet": "save_parameters saves only parameters assigned to attributes (self.name = ...)",
         }),
    Hint("state_map", ("parameters", "strict_loading", "compiled", "export"),
         "parameters: a trainable slot is not found, and the trainable set has unmatched tensors of its shape; "
         "the others: a check must set every slot and no tensor in the layer's registered state has the slot's name or "
         "is the only one of its shape (a slot held as an untracked attribute is the parameters check's to "
         "name, and is read where it is)",
         text="use --state-map SLOT=NAME"),
    # --- gradients -----------------------------------------------------------------------------------
    Hint("zero_gradient", ("gradients",),
         "the gradient is all zeros where the rule expects a nonzero one, and the call recorded no custom "
         "backward rule",
         text="The gradient is all zeros: no custom backward rule ran (none is defined, or it is bypassed), "
              "so autodiff differentiated the forward computation itself."),
    Hint("zero_gradient_rule_ran", ("gradients",),
         "the gradient is all zeros where the rule expects a nonzero one, and the call recorded a custom "
         "backward rule (so differentiation ran it)",
         text="The gradient is all zeros, and the layer's custom backward rule did run: the rule itself returns "
              "zeros here."),
    Hint("zero_gradient_framework", ("gradients",),
         "the gradient is all zeros where the rule expects a nonzero one, the call recorded no custom backward "
         "rule, in a framework with a way to bypass a custom rule by mistake",
         by_framework={
             "torch": " If the layer uses a torch.autograd.Function: call it through .apply, not .forward "
                      "(a forward called directly records no backward).",
             "mxnet": " On MXNet 1.9.1 a Function also writes no input gradient after the first input that "
                      "wants none (no attach_grad, not computed under record()): pass settings to the "
                      "Function's constructor, not to forward.",
         }),
    Hint("scaled_gradient", ("gradients",),
         "the gradient is the expected one times the same constant (not 0 or 1) everywhere",
         text="The gradient is {ratio}x the expected one everywhere: the backward rule is scaled wrongly."),
    Hint("rule_not_differentiable", ("second_order",),
         "grad of grad raises, or is zero or None where the reference's is not",
         text="grad of grad runs through the custom backward rule, so the rule must itself be differentiable "
              "by {fw}: written with {fw} operations, not numpy, on values still connected to the inputs "
              "(not detached, not intermediates saved from a forward pass that ran unrecorded)"),
    # --- compiled ------------------------------------------------------------------------------------
    Hint("compiled_backward_unused", ("compiled",),
         "a gradient is all zeros under the compiler and nonzero eagerly",
         text=" Under {compiler} the custom backward is not used: the gradient is autodiff of the forward "
              "computation (zero here), not the rule the eager layer applies."),
    Hint("compiled_side_effect", ("compiled",),
         "an output differs under the compiler, and the eager layer itself gives another value on the next "
         "identical call",
         text=" The eager layer itself gives another value on the next identical call while the compiled one "
              "does not: the value differs under {compiler} because the layer has a Python side effect (a "
              "counter, flag or cache in Python) that the compiler ran once, at trace time."),
    Hint("compiled_frozen_state", ("compiled",),
         "a value differs under the compiler, the eager layer repeats itself, and the gradient is not zero",
         text=" The value differs under {compiler}: the layer reads Python state (a global, an attribute, a "
              "flag such as the training mode) that the compiler froze at trace time, or has a Python side "
              "effect."),
    Hint("compiled_traced_branch", ("compiled",),
         "an output differs under the compiler, and the layer's Python traced anew on every call gives the "
         "compiled value while the same call run op by op gives the eager one",
         text=" Traced anew, the layer gives the compiled value, and run op by op it gives another: the layer "
              "takes another path when its inputs are traced than when they are arrays (a check such as "
              "isinstance(x, jax.core.Tracer)), so what runs under {compiler} is not what runs eagerly."),
    Hint("compiled_reads_value", ("compiled",),
         "the layer raises under the compiler with the framework's error for a value read while tracing",
         text=" The layer reads a tensor's value in Python (bool(), float(), .item(), .numpy(), asnumpy()) to "
              "branch or compute, and while the compiler traces there is no value: use the framework's "
              "conditional ops (where, cond) instead."),
    # --- batching: examples that are not independent -----------------------------------------------------
    Hint("batching_mixes", ("batching",),
         "another example's output moves when one example is changed",
         text="compute each example's statistics over its own axes only (a mean or norm with the feature axes "
              "given, never over axis {axis} or over everything); where mixing examples is the layer's meaning "
              "(a batch statistic), say so in the contract: batching: {{not_applicable: why}}"),
    Hint("batching_python_state", ("batching",),
         "a second identical call differs from the first, or a second call under the vectorising transform, on "
         "the same examples permuted, does not give the outputs permuted or raises where the first did not",
         text="The layer keeps Python state between calls (a cache keyed by shape, a counter, an attribute "
              "written in the call): a later call uses what an earlier one left. Keep such state in "
              "the framework's registered state, or recompute it on every call."),
    Hint("batching_closed_over", ("batching",),
         "the gradient under the vectorising transform raises the framework's error for a value of another "
         "trace (JAX's UnexpectedTracerError with a BatchTracer)",
         text="The custom gradient rule closes over a value of the batch (an input captured from the enclosing "
              "function, neither an argument of the custom_vjp function nor a residual of fwd): under vmap that "
              "value belongs to the vectorising trace. Pass it as an argument (nondiff_argnums for a setting) or "
              "return it from fwd as a residual."),
    Hint("batching_reads_value", ("batching",),
         "the layer raises under the vectorising transform with the framework's error for a value read",
         text="The layer (or its custom gradient rule) reads a tensor's value in Python (an `if` on a tensor, "
              "bool(), .item(), numpy): under the vectorising transform each example has its own value, so "
              "there is none to read; use the framework's ops (where, cond) and keep the rule in the framework's "
              "operations."),
    # --- construction: the ways real code builds a layer ----------------------------------------------------
    Hint("construction_factory_ignored", ("construction",),
         "the constructor takes device= and dtype= but a parameter or buffer is not on that device or in that dtype",
         by_framework={
             "torch": "Pass device= and dtype= on to every tensor the constructor creates, as torch.nn's layers do: "
                      "factory_kwargs = {{'device': device, 'dtype': dtype}}, then torch.empty(d, **factory_kwargs) "
                      "(a tensor made from data, torch.tensor(...) or torch.ones(d), needs them too).",
         }),
    Hint("construction_reset_incomplete", ("construction",),
         "after construction on meta, to_empty and reset_parameters, a parameter or buffer is left uninitialised "
         "or differs from a plain build's",
         by_framework={
             "torch": "reset_parameters() must set every parameter and buffer the constructor sets, in place (large "
                      "models are constructed on meta, materialised with to_empty(), whose memory is uninitialised, "
                      "then reset): move each initialisation from __init__ into reset_parameters (torch.nn.init.ones_"
                      "(self.weight), self.mask.copy_(...) under torch.no_grad()) and call it at the end of __init__.",
         }),
    Hint("construction_no_reset_parameters", ("construction",),
         "the contract requires reset_parameters and the module has none",
         by_framework={
             "torch": "Define reset_parameters() that initialises every parameter and buffer in place, and call it "
                      "at the end of __init__: construction on meta followed by to_empty() leaves uninitialised "
                      "memory that only reset_parameters can fill.",
         }),
    Hint("construction_weights_in_call", ("construction",),
         "build(input_shape) alone makes fewer weights than the contract declares, or a call adds weights",
         by_framework={
             "tensorflow": "Create every weight with self.add_weight(...) in build(input_shape) (or in __init__ "
                           "where its shape is known there), never in call(): Keras builds a layer from build() "
                           "alone (Model.build, summary(), loading a saved model) before any call.",
         }),
    Hint("construction_reads_in_init", ("construction",),
         "constructing the layer under nnx.eval_shape raises",
         by_framework={
             "jax": "The constructor reads an array's value (bool(), float(), an if on a value, .item(), numpy): "
                    "under nnx.eval_shape (abstract or sharded initialisation) arrays have shapes but no values. "
                    "Check the constructor's arguments instead, or the values in the call (with jnp.where, or "
                    "checkify).",
         }),
    # --- layout: strides that change the answer --------------------------------------------------------
    Hint("layout_view", ("layout",),
         "the layer raises torch's error for .view() on a tensor whose strides do not allow it",
         text="The layer (or its custom backward, on the incoming gradient) calls .view() on a tensor that is "
              "not contiguous (a transposed view, a slice with a step, a gradient autograd hands over as it is): "
              "use .reshape(), which copies only where it must, or call .contiguous() first."),
    Hint("layout_storage_order", ("layout",),
         "outputs or gradients differ between contiguous and non-contiguous inputs of the same values",
         text="The layer reads memory in storage order (data_ptr(), .storage()/untyped_storage(), as_strided, "
              "a flat view of the buffer) instead of by index, so the same values with other strides give other "
              "results: index tensors logically (their shape and indexing ops), or call .contiguous() before "
              "reading raw memory."),
    # --- aliasing: inputs written in place, one tensor passed twice ----------------------------------------
    Hint("aliasing_mutates_input", ("aliasing",),
         "the layer's call or backward changes an input, or moves its version counter, and the contract does "
         "not declare it in place",
         text="The layer writes into its input (an in-place op such as mul_, tanh_, add_, clamp_, x[...] = on "
              "the argument): the caller's tensor changes under it. Use out-of-place ops (x * s, torch.tanh(x)), "
              "or, where writing in place is the layer's meaning, declare it: aliasing: {{in_place: true}}."),
    Hint("aliasing_same_tensor", ("aliasing",),
         "one tensor passed for two inputs gets a gradient other than the sum of the two inputs' gradients",
         text="The custom gradient rule keys its gradients by the tensors' identity (id(), a dict keyed by the "
              "input, `x is y`) or saves inputs so that one tensor passed twice gets one gradient: return one "
              "gradient per argument position, each computed from that position's own input; the framework adds "
              "the two where one tensor fills both."),
    # --- abstract: shapes without data, and a symbolic batch dimension ------------------------------------
    Hint("abstract_output_shape", ("abstract",),
         "the output's shape or dtype computed without data (compute_output_shape, a symbolic call, a fake or "
         "meta tensor, eval_shape, MXNet's infer_shape) differs from the eager output's, or computing it raises",
         text="Make the abstract shape follow the real one: every op of the call must work on a tensor without "
              "values (no numpy, no host copies) and give an output whose shape follows from its inputs' shapes.",
         by_framework={
             "tensorflow": "Make the abstract shape follow the real one: where the layer states its output shape "
                           "(Keras' compute_output_shape or compute_output_spec), it must give the shape and dtype "
                           "the call returns, from the input shape alone; and every op of the call must work on a "
                           "KerasTensor without values (no numpy, no .numpy(), no host copies).",
             "mxnet": "Make the graph's shapes follow from the input's: MXNet infers the output's shape and dtype "
                      "from the HybridBlock's symbolic graph (infer_shape, infer_type), so every F.* operator in "
                      "hybrid_forward must have an output shape that follows from its inputs' shapes (not "
                      "contrib.boolean_mask, a nonzero or a unique of the data) and no NDArray-only call "
                      "(.asnumpy(), .shape, an `if` on a value) may decide it.",
         }),
    Hint("abstract_reads_value", ("abstract",),
         "the layer raises without data with the framework's error for a value read",
         text="The layer reads a tensor's value in Python in its forward (.item(), .numpy(), float(x), int(x), an "
              "`if` on a tensor): a shape computed without data, or a traced program, has no value to read. Keep "
              "it a tensor op (where, cond, a mask) and leave the decision to the framework."),
    Hint("abstract_fixed_batch", ("abstract",),
         "the program with a symbolic batch dimension cannot be built, or at another batch size gives a wrong "
         "shape or values",
         by_framework={
             "torch": "The layer fixes the batch size: hard-coded, or remembered from the first call (an attribute "
                      "set once). Read it from the input's shape on every call (x.shape[0], or -1 in a reshape).",
             # x.shape[0] is the None it read: the static shape of a symbolic batch
             "tensorflow": "The layer fixes the batch size: hard-coded, remembered from the first call, or read "
                           "from the static shape (int(x.shape[0]), which is None while the batch is symbolic, in "
                           "a tf.function or a functional model). Read it as a tensor on every call "
                           "(keras.ops.shape(x)[0]), or use -1 in a reshape.",
             "jax": "The layer fixes the batch size: a Python loop over the rows (for i in range(x.shape[0])), "
                    "int(x.shape[0]), a size hard-coded or remembered from the first call. Under jax.export the "
                    "batch is a symbolic dimension, not a Python int: compute on the whole batch with array ops "
                    "(a reduction with axis=-1, jax.vmap over the rows), and use -1 in a reshape.",
             "mxnet": "The layer fixes the batch size in its graph: a number in F.reshape's shape, or one "
                      "remembered from the first call. A hybridized block's Symbol has no shape to read: use 0 "
                      "(copy this dimension) or -1 (infer it) in F.reshape's shape, or F.reshape_like / "
                      "F.broadcast_like against the input.",
         }),
    Hint("abstract_held_tensor", ("abstract",),
         "the layer on the meta device (or under fake tensors) meets a real tensor on another device",
         text="The layer computes with a tensor it holds outside its registered state (a cache or memo kept "
              "from an earlier call, a plain tensor attribute), which stays where it was when the layer "
              "moves: register it (register_buffer) or recompute it from the inputs on every call."),
    # --- export: what usually breaks each format, said after the framework's own error -------------------
    *(Hint(f"export_save:{fmt}", ("export",), f"saving as {fmt} raised", text=text) for fmt, text in (
        ("torch.export", "torch.export traces forward with example inputs: Python control flow on tensor values, "
                         "numpy calls or .item() in forward cannot be exported"),
        ("torch.save", "torch.save of a whole module pickles every attribute, and its class by module path: a "
                       "lambda, a local function or an open handle held by the module, or a class not defined at "
                       "a module's top level, cannot be saved"),
        ("keras", "a .keras file stores get_config(): get_config() must return every constructor argument "
                  "(Keras writes one automatically only when every argument is a plain value)"),
        ("savedmodel", "tf.saved_model.save traces the layer into a graph: Python side effects and numpy calls "
                       "inside call() do not trace"),
        ("jax.export", "jax.export serializes traced JAX code only: a host callback (jax.pure_callback, "
                       "jax.debug.callback, numpy inside the layer through a callback) cannot be exported"),
        ("nnx", "the nnx format pickles nnx.split's graph definition: every static attribute of the module (not "
                "a lambda, a local function, an open handle) and its class (defined at a module's top level) "
                "must pickle"),
        ("gluon.export", "HybridBlock.export needs a graph: hybrid_forward must use F.* operators only (no "
                         "NDArray attributes, .asnumpy() or Python branching on values), and constants held as "
                         "self.params.get_constant"),
    )),
    # no export_load hint for torch.save or nnx: pickle refuses, when saving, a class it could not find again
    # by module path, and the fresh process imports the implementation's module, so a class that saved loads
    *(Hint(f"export_load:{fmt}", ("export",), f"loading the {fmt} save in a fresh process raised (for keras: "
           f"an error none of the keras_* hints recognizes)", text=text) for fmt, text in (
        ("state_dict", "the fresh instance built from the constructor arguments does not take the saved state"),
        ("keras", "Keras rebuilds the layer as cls.from_config(get_config()), then build_from_config() calls "
                  "build() with the input shape saved in the file's JSON (a list, not a tuple) to create its "
                  "weights before they load"),
    )),
    *(Hint(f"export_value:{fmt}", ("export",), f"the layer loaded from {fmt} in a fresh process is not "
           f"bit-equal to the original", text=text) for fmt, text in (
        ("state_dict", "the output depends on something state_dict does not hold (a plain tensor or Python "
                       "attribute changed after construction, a buffer registered with persistent=False)"),
        ("torch.save", "the output depends on something outside the module's pickled state (a global, a "
                       "class attribute changed at run time)"),
        ("keras", "the output depends on something neither get_config() nor the weights hold (a constructor "
                  "argument left out of get_config(), which from_config then leaves at its default; an "
                  "attribute set after construction)"),
        ("nnx", "the output depends on something outside the module's state and graph definition"),
    )),
    # the classic Keras mistakes, told apart by what from_config or loading raised (``key`` in its text)
    Hint("keras_kwargs", ("export",), "loading the .keras file raised 'unexpected keyword argument'",
         text="__init__ must accept **kwargs and pass them to super().__init__: from_config passes name, dtype "
              "and trainable back"),
    Hint("keras_config_args", ("export",), "loading the .keras file raised 'required positional argument'",
         text="get_config() must return every constructor argument (an overridden get_config replaces Keras's "
              "automatic one: start from super().get_config() and add them)"),
    # Keras 3 refuses new state in call(), so a different weight count comes from how the layer is rebuilt
    Hint("keras_build", ("export",), "loading the .keras file raised about 'variables'",
         text="the layer rebuilt by from_config(get_config()) and build() does not create the weights the file "
              "holds: every constructor argument that decides which weights exist must be in get_config()"),
    # --- mixed precision ---------------------------------------------------------------------------------
    Hint("mixed_variables_low", ("mixed_precision",),
         "under a mixed-precision policy a floating variable is in a 16-bit dtype instead of float32",
         by_framework={
             "torch": "keep the nn.Parameter float32 and leave the casting to autocast (or cast a local copy "
                      "in forward); never assign the 16-bit copy back to the parameter",
             "tensorflow": "create the weight with self.add_weight(...) without dtype= (Keras then uses the "
                           "policy's variable_dtype) and let the policy cast it at compute time",
             "jax": "create nnx.Param values in param_dtype and cast them to dtype inside __call__, as "
                    "flax.nnx.Linear does",
             "mxnet": "keep the Parameters float32 under AMP (no Block.cast or astype on their data in "
                      "forward): AMP casts them per operator",
         }),
    Hint("mixed_policy_ignored", ("mixed_precision",),
         "a Keras layer constructed with dtype=<policy> reports a compute dtype other than the policy's",
         by_framework={
             "tensorflow": "pass **kwargs (dtype among them) on to super().__init__(**kwargs), so that the "
                           "layer takes the dtype policy it is constructed with",
         }),
    # --- dtypes ----------------------------------------------------------------------------------------
    # the precision a failure in a dtype comes from, measured where a per-dtype check fails in a dtype other
    # than the cases' own (layer_conformance.checks.precision); each names the knob that narrows a layer's claim
    Hint("computes_narrow", _NUMERIC,
         "the layer's forward fails in the dtype, and the same layer built and run one dtype wider on the same "
         "inputs and state, rounded back, is within tolerance of the reference",
         by_framework={fw: "The layer computes in {dtype} arithmetic: the same layer in {wide}, rounded to {dtype}, "
                           "is within tolerance; compute the statistic in {wide} (e.g. " + upcast + "), or leave "
                           "{dtype} out of this layer's `dtypes` (a binding's dtypes:, or --dtype)."
                       for fw, upcast in (("torch", "`x.to(torch.{wide})`, as `x.float()` is for float32"),
                                          ("tensorflow", '`ops.cast(x, "{wide}")`'),
                                          ("jax", "`x.astype(jnp.{wide})`"),
                                          ("mxnet", "`x.astype('{wide}')`"))}),
    # the same measurement, where the narrow output is inf and the wide one, rounded back, is finite: an intermediate
    # (exp(x) beyond 11 in float16) overflows, where no statistic is wrong; the stable forms that never make it
    Hint("computes_narrow_overflow", _NUMERIC,
         "computes_narrow applies, and the layer's output in the dtype is infinite where the same layer one dtype "
         "wider, rounded back, is finite (an intermediate such as exp(x) overflows)",
         by_framework={fw: "The layer overflows in {dtype}: an intermediate (such as exp(x), beyond 11 in float16) "
                           "exceeds {dtype}'s range where the result does not, so the output is inf; the same layer "
                           "in {wide}, rounded to {dtype}, is within tolerance. Compute it in {wide} (e.g. "
                           + upcast + ") or in a stable form that never makes the large intermediate (" + stable
                           + "), or leave {dtype} out of this layer's `dtypes` (a binding's dtypes:, or --dtype)."
                       for fw, upcast, stable in (
                           ("torch", "`x.to(torch.{wide})`", "for log(1 + exp(x)): `torch.nn.functional.softplus(x)`"
                                                             " or `torch.logaddexp(x, torch.zeros_like(x))`"),
                           ("tensorflow", '`ops.cast(x, "{wide}")`', "for log(1 + exp(x)): `keras.ops.softplus(x)` "
                                                                      "or `keras.ops.logaddexp(x, 0.0)`"),
                           ("jax", "`x.astype(jnp.{wide})`", "for log(1 + exp(x)): `jax.nn.softplus(x)` or "
                                                             "`jnp.logaddexp(x, 0.0)`"),
                           ("mxnet", "`x.astype('{wide}')`", "for log(1 + exp(x)): `F.relu(x) + F.log1p(F.exp(-F.abs(x)))`"
                                                             ", or `F.Activation(x, act_type='softrelu')`"))}),
    # after the measurement "The layer computes float64 inputs at float32 precision (error .., float32's epsilon is ..)"
    Hint("computes_float32", _NUMERIC,
         "a float64 forward's error relative to the output's scale is float32-sized (1/16 to 256 times "
         "float32's epsilon)",
         text="compute in the input's dtype, or leave float64 out of this layer's `dtypes` (a binding's dtypes:, "
              "or --dtype)."),
    # after the measurement: the error in ulps, the native layer's as a yardstick, why no cause explains it
    Hint("precision_unexplained", _NUMERIC,
         "the layer's forward fails in the dtype and neither a wider run nor float32 precision explains it",
         text="If this layer is not meant for {dtype}, leave {dtype} out of its `dtypes` (a binding's dtypes:, "
              "or --dtype)."),
    Hint("accumulated_16bit", _NUMERIC,
         "computes_narrow applies, the contract declares accumulate, and on every failing case the "
         "outputs are at least 4x closer to the reference with its statistics summed one term at a time in "
         "that dtype than to the true reference (the reference module's accumulated_in)",
         text="The outputs match the reference with its statistics summed in {dtype}: the statistics were "
              "accumulated in {dtype} (the contract requires {accumulate} accumulation: upcast before the "
              "reduction)."),
    # Keras wraps any error of from_config in a TypeError that names get_config
    Hint("keras_config", ("export",), "loading the .keras file raised about 'get_config'",
         text="from_config passes get_config()'s entries to __init__ by keyword: get_config() must return every "
              "constructor argument under its own name (an overridden get_config replaces Keras's automatic "
              "one: start from super().get_config() and add them)"),
)}


class Findings(list):
    """A check's problems (texts, in order), each hint said once after them: the same mistake shows on every
    case, slot, compiler and policy, and its hint need not."""

    def __init__(self):
        super().__init__()
        self.hints: dict[str, None] = {}

    def add(self, problem: str, said: str = ""):
        """One problem, and the hint that explains it ('' for none)."""
        self.append(problem)
        self.say(said)

    def say(self, said: str):
        if said and said.strip():
            self.hints[said.strip()] = None

    def text(self) -> str:
        return "; ".join(list(self) + list(self.hints))


def hint(hint_id: str, framework: str | None = None, **values) -> str:
    """The text of one hint ('' where it has none for this framework)."""
    return HINTS[hint_id].render(framework, **values)


def state_map_hint(slots, names, wants: dict | None = None) -> str:
    """``state_map``'s text with the mapping written out (``state_map.proposed``: by a component of a dotted name,
    or with ``names`` {name: shape} and ``wants`` {slot: shape} by a shape held with its axes reversed, ``|T``); the
    slots it cannot tell stay ``SLOT=NAME``."""
    from ..state_map import proposed
    pairs = [proposed(slot, names, wants) for slot in slots]
    if not any(pairs):
        return hint("state_map")
    return "use " + " ".join(f"--state-map {slot}={p or 'NAME'}" for p, slot in zip(pairs, slots))


# --- known mistakes, recognized by the shape of the error (``values``) --------------------------------

@dataclass(frozen=True)
class KnownMistake:
    id: str                    # its hint id
    references: tuple          # reference module names (the contract's reference.module, last part)
    description: str
    variant: Callable          # (*inputs, **constructor_and_state) -> output


def _bias(y, bias):
    return y if bias is None or isinstance(bias, bool) else y + bias


def _rms_eps_outside(X, *, gain, eps, bias=None, **_):
    return _bias(X / (np.sqrt((X ** 2).mean(-1, keepdims=True)) + eps) * gain, bias)


def _rms_wrong_axis(X, *, gain, eps, bias=None, **_):
    return _bias(X / np.sqrt((X ** 2).mean(0, keepdims=True) + eps) * gain, bias)


def _rms_eps_dropped(X, *, gain, eps, bias=None, **_):
    return _bias(X / np.sqrt((X ** 2).mean(-1, keepdims=True)) * gain, bias)


def _centered_median(X, **_):  # the contract centers on the mean of all elements
    return X - np.median(X)


def _centered_lower_median(X, **_):
    # torch.median without a dim returns the lower of the two middle values, not their mean
    return X - np.sort(X, axis=None)[(X.size - 1) // 2]


KNOWN_MISTAKES = (
    KnownMistake("rms_eps_outside_sqrt", ("rmsnorm", "rmsnorm_bias"), "eps is added outside the square root: "
                 "x / (sqrt(mean(x^2)) + eps) instead of x / sqrt(mean(x^2) + eps)", _rms_eps_outside),
    KnownMistake("rms_wrong_axis", ("rmsnorm", "rmsnorm_bias"), "the mean square is taken over the first axis "
                 "(the batch) instead of the last (the features)", _rms_wrong_axis),
    KnownMistake("rms_eps_dropped", ("rmsnorm", "rmsnorm_bias"), "eps is left out: x / sqrt(mean(x^2))",
                 _rms_eps_dropped),
    KnownMistake("centered_median", ("centered",), "the median is subtracted instead of the mean",
                 _centered_median),
    KnownMistake("centered_median", ("centered",), "the median is subtracted instead of the mean",
                 _centered_lower_median),
)
_KNOWN_SAID = "The outputs match a known mistake on every case: {description}"
for _m in KNOWN_MISTAKES:
    HINTS[_m.id] = Hint(_m.id, ("values",), f"values fails and the outputs match, on every case, the "
                        f"reference with this mistake made ({'/'.join(_m.references)})",
                        text=_KNOWN_SAID.format(description=_m.description))


def recognize(ctx, state, outputs) -> str:
    """The known mistake that explains every case's output, as a sentence; else ''.
    ``outputs``: [(inputs, the layer's output)] for the cases checked."""
    module = (ctx.contract.reference.module or "").rpartition(".")[2]
    kw = {**ctx.contract.constructor, **state}
    for mistake in KNOWN_MISTAKES:
        if module not in mistake.references:
            continue
        matched, differs = True, False
        _, forward, _ = reference(ctx.contract)
        for inputs, got in outputs:
            x64 = [np.asarray(a, dtype=np.float64) if is_floating(a.dtype) else a for a in inputs]
            try:
                with np.errstate(all="ignore"):  # a zero row divides by zero where eps is dropped
                    want = mistake.variant(*x64, **kw)
            except Exception:  # a variant that does not apply to these inputs
                want = None
            if want is None or np.shape(want) != np.shape(got):
                matched = False
                break
            rtol, atol = ctx.tolerance("values", str(got.dtype))
            if describe_mismatch(got, want, rtol, atol, ulps=ctx.ulps("values", str(got.dtype))):
                matched = False
                break
            ref = np.asarray(forward(*x64, **kw), dtype=np.float64)
            differs = differs or not np.allclose(ref, want, rtol=rtol, atol=atol, equal_nan=True)
        if matched and differs:
            return hint(mistake.id)
    return ""


# --- accumulation precision (``accumulate``), recognized by the same outputs ------------------------

CLOSER = 4.0  # how much closer to the 16-bit-accumulated reference than to the true one


def _distance(got, want) -> float:
    """The largest absolute difference, a NaN or infinity against anything else counting as infinite."""
    g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        d = np.abs(g - w)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    return float(np.max(np.where(same, 0.0, np.where(np.isnan(d), np.inf, d)))) if d.size else 0.0


def accumulated_low(ctx, state, outputs) -> str:
    """Where the contract declares ``accumulate`` and a 16-bit output fails: the hint that its statistics
    were accumulated in the 16-bit dtype, if every failing case's output is ``CLOSER`` times closer to the
    reference with the statistics summed in that dtype than to the true one; else ''."""
    from ..dtypes import HALF
    from ..boundary.session import reference_names
    need = ctx.contract.accumulate
    # the reference module's own ``accumulated_in`` (docs/contracts.md, ``accumulate``): the reference with its
    # statistics summed in a given dtype
    if not need or not outputs or ctx.contract.reference.impl or \
            "accumulated_in" not in reference_names(ctx.contract.reference.module)[0]:
        return ""
    kw = {**ctx.contract.constructor, **state}
    module, forward, _ = reference(ctx.contract)
    variant = module.accumulated_in
    failing = 0
    for inputs, got in outputs:
        dtype = str(got.dtype)
        if dtype not in HALF:
            return ""
        x64 = [np.asarray(a, dtype=np.float64) if is_floating(a.dtype) else a for a in inputs]
        want = np.asarray(forward(*x64, **kw), dtype=np.float64)
        if np.shape(want) != np.shape(got):
            return ""
        rtol, atol = ctx.tolerance("values", dtype)
        if not describe_mismatch(got, want, rtol, atol, ulps=ctx.ulps("values", dtype)):
            continue
        failing += 1
        with np.errstate(all="ignore"):
            low = np.asarray(variant(*inputs, dtype=dtype, **kw), dtype=np.float64)
        if not CLOSER * _distance(got, low) <= _distance(got, want):
            return ""
    return hint("accumulated_16bit", dtype=dtype, accumulate=need) if failing else ""
