"""A native layer called as its contract entry says (``native.<fw>.call``): the inputs in its own order and
literal keywords reach it, so a native that is causal only through a keyword is checked as causal; a keyword it
does not take is the contract's problem, never the layer's. (A call naming an unknown input is refused at load:
tests/hostile_contracts/native_call.yaml.)"""
from pathlib import Path

import pytest

from layer_conformance.contract import bundled_contracts
from layer_conformance.frameworks import installed
from layer_conformance.reference_check import load_checked
from layer_conformance.runner import context_for, run_check

BUNDLED = Path(bundled_contracts()["causal_attention"])
TF_CALL = "call: {inputs: [X, X], kwargs: {use_causal_mask: true}}"
JAX_CALL = "call: {kwargs: {is_causal: true}}"


def _variant(tmp_path, old: str, new: str):
    """The bundled causal_attention contract with one native entry's call changed."""
    text = BUNDLED.read_text()
    assert text.count(old) == 1, f"the bundled contract no longer holds {old!r}"
    path = tmp_path / "causal_attention.yaml"
    path.write_text(text.replace(old, new))
    return load_checked(path), path


def _native(session, contract, framework):
    impl = f"layer_conformance.reference_impls.{framework}.causal_attention:IMPL"
    return run_check(context_for(contract, impl, framework, session=session), "native")


@pytest.mark.skipif(not installed("tensorflow"), reason="needs tensorflow")
def test_keras_attention_called_without_its_causal_keyword_differs(session, tmp_path):
    # the correct layer passes native with the bundled call (the matrix); without the keyword, Keras' attention
    # sees the future, and the check says where: so the keyword is what made it causal
    contract, _ = _variant(tmp_path, TF_CALL, "call: {inputs: [X, X]}")
    rec = _native(session, contract, "tensorflow")
    assert rec["outcome"] == "failed", rec
    assert "case 'random' vs native keras.layers.MultiHeadAttention: mismatched elements" in rec["message"], rec


@pytest.mark.skipif(not installed("tensorflow"), reason="needs tensorflow")
def test_a_keyword_the_native_does_not_take_is_a_contract_problem(session, tmp_path):
    contract, path = _variant(tmp_path, TF_CALL, "call: {inputs: [X, X], kwargs: {use_causal_masc: true}}")
    rec = _native(session, contract, "tensorflow")
    assert rec["outcome"] == "error", rec
    msg = rec["message"]
    assert msg.startswith(f"the contract's native layer keras.layers.MultiHeadAttention "
                          f"({path}:{contract.line('native', 'tensorflow')}: native.tensorflow) raised "), msg
    assert "use_causal_masc" in msg and msg.endswith("a contract problem, not the layer's"), msg


@pytest.mark.skipif(not installed("tensorflow"), reason="needs tensorflow")
def test_a_native_given_too_few_inputs_is_a_contract_problem(session, tmp_path):
    # Keras' attention takes query and value: the case's one X alone is a call the contract got wrong
    contract, _ = _variant(tmp_path, TF_CALL, "call: {kwargs: {use_causal_mask: true}}")
    rec = _native(session, contract, "tensorflow")
    assert rec["outcome"] == "error", rec
    assert "when built with its args and called as its call says" in rec["message"], rec
    assert rec["message"].endswith("a contract problem, not the layer's"), rec


@pytest.mark.skipif(not installed("jax"), reason="needs jax")
def test_nnx_attention_called_without_is_causal_differs(session, tmp_path):
    contract, _ = _variant(tmp_path, JAX_CALL, "call: {kwargs: {}}")
    rec = _native(session, contract, "jax")
    assert rec["outcome"] == "failed", rec
    assert "case 'random' vs native flax.nnx.MultiHeadAttention: mismatched elements" in rec["message"], rec
