"""Third-party PyTorch code bound to the bundled contracts the way a user binds their own: a
one-line factory where the constructor's argument names differ from the contract's."""
import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import LlamaRMSNorm


def llama_rmsnorm(d, eps):
    """transformers' LlamaRMSNorm (upcasts to float32 inside forward) under the contract's d, eps."""
    return LlamaRMSNorm(hidden_size=d, eps=eps)


def softplus(x):
    """torch.nn.functional.softplus as log1pexp: beyond its threshold (x > 20) it returns x, which
    equals log(1 + exp(x)) to float32 precision."""
    return F.softplus(x)


def cross_entropy(logits, labels):
    """torch.nn.functional.cross_entropy with probability targets, per example; the labels are
    data, so they are detached (the contract gives them no gradient)."""
    return F.cross_entropy(logits, labels.detach(), reduction="none")


def torch_rmsnorm(d, eps):
    """torch.nn.RMSNorm (argument names normalized_shape, eps)."""
    import torch
    return torch.nn.RMSNorm(d, eps=eps)


def deberta_layernorm(d, eps):
    """transformers' DebertaLayerNorm, a LayerNorm with bias written by hand (upcasts to float32 inside
    forward), under the contract's d, eps."""
    from transformers.models.deberta.modeling_deberta import DebertaLayerNorm
    return DebertaLayerNorm(size=d, eps=eps)


def emu3_groupnorm(groups, channels, eps):
    """transformers' Emu3VQVAEGroupNorm (an nn.GroupNorm whose forward calls F.group_norm, with an unused
    quant_states argument), under the contract's groups, channels, eps."""
    from transformers.models.emu3.modeling_emu3 import Emu3VQVAEGroupNorm
    return Emu3VQVAEGroupNorm(num_groups=groups, num_channels=channels, eps=eps)


class LlamaRotary(torch.nn.Module):
    """transformers' LlamaRotaryEmbedding (inv_freq a non-persistent float32 buffer, cos and sin computed in float32
    and cast to the input's dtype) and apply_rotary_pos_emb (rotate_half pairing, products in the input's dtype),
    under the contract's head_dim, base and X [batch, heads, seq, head_dim], positions 0..seq-1."""

    def __init__(self, head_dim, base):
        super().__init__()
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
        config = LlamaConfig(hidden_size=head_dim, num_attention_heads=1, head_dim=head_dim, rope_theta=base)
        self.rope = LlamaRotaryEmbedding(config)

    def forward(self, X):
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
        cos, sin = self.rope(X, torch.arange(X.shape[-2], device=X.device)[None])  # [1, seq, head_dim]
        # cos[0] unsqueezed at 0 broadcasts over every leading axis (a vmapped example has no batch axis)
        rotated, _ = apply_rotary_pos_emb(X, X, cos[0], sin[0], unsqueeze_dim=0)
        return rotated


class LlamaCausalAttention(torch.nn.Module):
    """transformers' LlamaAttention (q_proj, k_proj, v_proj, o_proj: nn.Linear without bias, [out, in]; eager
    attention, softmax in float32 cast back to the input's dtype) under the contract's d, heads, max_len. What a
    decoder hands it, this wrapper holds: the rotary embedding at the identity (cos 1, sin 0: the contract has no
    positions) and the causal mask, a bool buffer [max_len, max_len] turned into the additive -inf mask per call.
    LlamaAttention needs its batch axis: a vmapped example [T, d] is given one."""

    def __init__(self, d, heads, max_len):
        super().__init__()
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaAttention
        config = LlamaConfig(hidden_size=d, num_attention_heads=heads, num_key_value_heads=heads,
                             head_dim=d // heads, attention_bias=False, attention_dropout=0.0,
                             attn_implementation="eager")
        self.attn = LlamaAttention(config, layer_idx=0)
        self.register_buffer("mask", torch.empty(max_len, max_len, dtype=torch.bool))
        self.reset_parameters()

    def reset_parameters(self):
        # the mask's fill (nn.Linear's reset_parameters draws the projections): a build on meta can be initialised
        with torch.no_grad():
            self.mask.copy_(torch.triu(torch.ones_like(self.mask), 1))

    def forward(self, X):
        batched = X if X.dim() == 3 else X[None]
        B, T, _ = batched.shape
        head_dim = self.attn.head_dim
        identity = (batched.new_ones(B, T, head_dim), batched.new_zeros(B, T, head_dim))
        additive = batched.new_zeros(T, T).masked_fill(self.mask[:T, :T], float("-inf"))[None, None]
        out, _ = self.attn(batched, position_embeddings=identity, attention_mask=additive)
        return out if X.dim() == 3 else out[0]


def llama_mlp(d, hidden, act="silu"):
    """transformers' LlamaMLP (gate_proj, up_proj, down_proj: nn.Linear without bias, [out, in]; down_proj(act(
    gate_proj(x)) * up_proj(x))) under the contract's d, hidden. One attention head: the config refuses a hidden
    size that its default 32 heads do not divide, and the MLP does not read it."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaMLP
    return LlamaMLP(LlamaConfig(hidden_size=d, intermediate_size=hidden, hidden_act=act, mlp_bias=False,
                                num_attention_heads=1, num_key_value_heads=1))


def llama_mlp_gelu(d, hidden):
    """LlamaMLP with hidden_act "gelu": transformers' GELUActivation, torch's exact (erf) gelu."""
    return llama_mlp(d, hidden, act="gelu")
