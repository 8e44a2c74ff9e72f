"""Per-example gradients and clipping: Σ_i clip_C(∇ℓ(θ; x_i)) for one batch.

:func:`clipped_grad_sum` returns Σ_i clip_C(g_i), the per-example norms ||g_i|| and the summed
loss.  Clipping factor c_i = min(1, C / (||g_i|| + 1e-6)), Opacus's formula, so a clipped
gradient's norm never exceeds C.  The result is the exact DP-SGD clipped sum; two ways compute it:

**Ghost clipping with book-keeping** (models whose parameters all sit in layers of the
:data:`GHOST_LAYERS` registry, today ``nn.Linear`` and ``nn.Conv2d``, the loss of
:func:`dplab.training.models.example_loss`): one batched forward pass records each layer's input
a and output z (forward hooks), one backward pass gives the output gradients g = ∂(Σ_i ℓ_i)/∂z
(row i depends on example i only: no batch-coupled layers).  An ``nn.Sequential`` of Linear layers
and activations runs both passes itself, :func:`_stack_pass`: the same ATen operations as the
model's forward pass and autograd's backward pass, without hooks, ``functional_call`` or the cost
of autograd's graph (benchmarks/README.md).  Then, per layer, without materializing per-example
gradients where that is cheaper:

- Linear on a (B, d) input: ||∇_W ℓ_i||² = ||a_i||²·||g_i||², ||∇_b ℓ_i||² = ||g_i||²
  (Goodfellow 2015; Lee & Kifer 2021 "ghost norm");
- Linear on a sequence (B, T, d) and Conv2d (unfolded patches a of shape (B, T, k), T output
  positions): ∇_W ℓ_i = Σ_t g_{i,t} a_{i,t}ᵀ, whose squared norm is either taken from the
  materialized (B, p, k) product or by the Gram trick Σ_{t,t'} (a_t·a_t')(g_t·g_t')
  (Li et al. 2022), whichever costs fewer operations (T·(k + p) < k·p → Gram); a Conv2d's
  (B, p, k) is computed without unfolding, as the weight gradient of one convolution with the
  batch as groups, where that is faster (:func:`grouped_wins`: CPU with 8–32 input channels,
  CUDA from Volta on);
- the clipped sum by book-keeping (Bu et al. 2023): Σ_i c_i ∇_W ℓ_i = Σ_{i,t} (c_i
  g_{i,t}) a_{i,t}ᵀ, one matrix product of the stored a and the rescaled g (or Σ_i c_i G_i
  when G was materialized).
- The L2 term (l2/2)·||θ||² of every example adds l2·θ to g_i:
  ||g_i||² = ||g_i^CE||² + 2·l2·⟨θ, g_i^CE⟩ + l2²·||θ||², where ⟨θ, g_i^CE⟩ = Σ_layers Σ_t
  g_{i,t}·z_{i,t} (z = W a + b), and Σ_i c_i l2·θ = l2·θ·Σ_i c_i.

**torch.func** (``grad`` of the one-example loss, ``vmap`` over the batch) for every model file's
network (:func:`dplab.training.models.example_loss`, ``batched=False``) and everything else:
any parameter outside a Linear/Conv2d layer (e.g. LayerNorm, Embedding) or shared by two layers
(tied weights), grouped or non-zero-padded convolutions, string paddings, a layer called twice in
one forward pass or whose input or output is changed in place afterwards, batch-norm layers, or a
loss without the ``model``/``l2`` attributes that :func:`models.example_loss` sets.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

log = logging.getLogger("dplab")

#: added to the norm in the clipping factor (Opacus 1.6 uses the same constant)
CLIP_EPS = 1e-6


@dataclass
class ClippedGrads:
    grad_sum: dict[str, torch.Tensor]  # Σ clip(g_i), one tensor per parameter
    norms: torch.Tensor  # (B,) unclipped per-example gradient norms
    loss_sum: torch.Tensor  # Σ ℓ(θ; x_i) over the batch (a scalar)


def clipped_grad_sum(
    loss: Callable,
    params: dict[str, torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    clip: float | None,
    ghost: bool = True,
    mask: torch.Tensor | None = None,
    summed: bool = True,
) -> ClippedGrads:
    """Σ_i clip(∇ℓ(θ; x_i)) over the batch (``clip=None``: no clipping).  An
    empty batch gives zeros.  ``summed=False``: the norms and the loss only, by the same
    operations, without the clipped sum (``grad_sum`` empty; the individual accounting reads every
    record's norm at every step).

    ``ghost=False`` forces the torch.func path, which (unlike ghost clipping's autograd hooks)
    can itself be transformed, e.g. ``vmap``-ed over many runs.  ``mask``: (B,) 0/1 weights,
    Σ_i mask_i·clip(g_i) and Σ_i mask_i·ℓ_i, so that a batch padded to a fixed size gives the
    clipped sum of its real rows (runs vmapped together, a CUDA graph's step); ``norms`` keeps
    one entry per row, padding included."""
    if len(x) == 0:
        zeros = {k: torch.zeros_like(p) for k, p in params.items()}
        empty = torch.zeros(0, device=x.device)
        return ClippedGrads(zeros, empty, torch.zeros((), device=x.device))
    model = getattr(loss, "model", None)
    if ghost and model is not None and ghost_supported(model, params):
        out = _ghost(model, float(loss.l2), params, x, y, clip, mask, summed)
        if out is not None:
            return out
    return _materialized(loss, params, x, y, clip, mask, summed)


def ghost_supported(model: nn.Module, params: dict[str, torch.Tensor]) -> bool:
    """Whether :func:`clipped_grad_sum` takes the ghost-clipping path for ``model``."""
    plan = _plan(model)
    return (
        plan.supported
        and len(params) == len(plan.parameters)
        and plan.parameters.issuperset(params)
    )


@dataclass(frozen=True)
class _Plan:
    """What ghost clipping needs of a model's structure, read once per model (:func:`_plan`)."""

    supported: bool  # every parameter in a supported layer, none in two, no batch-norm layer
    parameters: frozenset[str]  # the model's parameter names
    layers: dict[nn.Module, str]  # each layer of a :data:`GHOST_LAYERS` type → its name
    keys: dict[nn.Module, tuple[str, str | None]]  # each layer → its weight's and bias's names
    #: an ``nn.Sequential`` of distinct Linear layers and :data:`STACK_MODULES`: its children,
    #: run without hooks or autograd (:func:`_stack_pass`); None for any other model
    stack: tuple[nn.Module, ...] | None


_ATEN = torch.ops.aten

#: the parameter-free modules besides ``Flatten`` (from dimension 1) that a :attr:`_Plan.stack` may
#: hold between its Linear layers (each acts on every example alone, elementwise), each with its
#: backward ``(module, g, input, output) -> ∂/∂input``: the ATen operation that autograd's own
#: derivative formula runs for it (PyTorch's ``tools/autograd/derivatives.yaml``), so that
#: :func:`_stack_pass` gives autograd's output gradients bit for bit without autograd
STACK_MODULES: dict[type[nn.Module], Callable] = {
    nn.ReLU: lambda m, g, h, out: _ATEN.threshold_backward(g, out, 0),
    nn.Tanh: lambda m, g, h, out: _ATEN.tanh_backward(g, out),
    nn.Sigmoid: lambda m, g, h, out: _ATEN.sigmoid_backward(g, out),
    nn.GELU: lambda m, g, h, out: _ATEN.gelu_backward(g, h, approximate=m.approximate),
    nn.SiLU: lambda m, g, h, out: _ATEN.silu_backward(g, h),
    nn.LeakyReLU: lambda m, g, h, out: _ATEN.leaky_relu_backward(g, h, m.negative_slope, False),
    nn.ELU: lambda m, g, h, out: _ATEN.elu_backward(g, m.alpha, 1, 1, False, h),
    nn.Identity: lambda m, g, h, out: g,
}

_PLANS: "weakref.WeakKeyDictionary[nn.Module, _Plan]" = weakref.WeakKeyDictionary()


def _plan(model: nn.Module) -> _Plan:
    """The model's :class:`_Plan`, cached (a model's layers do not change while it trains)."""
    plan = _PLANS.get(model)
    if plan is None:
        tied = len(list(model.named_parameters(remove_duplicate=False))) > len(
            list(model.named_parameters())
        )  # one tensor in two layers: its gradient is the sum of both, its norm not theirs
        supported = not tied and all(
            not isinstance(m, nn.modules.batchnorm._NormBase)
            and (
                not list(m.parameters(recurse=False))
                or (type(m) in GHOST_LAYERS and GHOST_LAYERS[type(m)].supports(m))
            )
            for m in model.modules()
        )
        layers = {m: name for name, m in model.named_modules() if type(m) in GHOST_LAYERS}
        prefix = {m: f"{name}." if name else "" for m, name in layers.items()}
        plan = _PLANS[model] = _Plan(
            supported,
            frozenset(k for k, _ in model.named_parameters()),
            layers,
            {
                m: (prefix[m] + "weight", None if m.bias is None else prefix[m] + "bias")
                for m in layers
            },
            tuple(model) if supported and _is_stack(model) else None,
        )
    return plan


def _is_stack(model: nn.Module) -> bool:
    """Whether ``model`` is an ``nn.Sequential`` of distinct Linear layers, ``Flatten`` from
    dimension 1 and :data:`STACK_MODULES` (not in place), none with a hook."""
    if type(model) is not nn.Sequential:
        return False
    linear = [m for m in model if type(m) is nn.Linear]
    return len(set(map(id, linear))) == len(linear) and all(
        not (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks)
        and (
            type(m) is nn.Linear
            or (type(m) is nn.Flatten and m.start_dim == 1)
            or (type(m) in STACK_MODULES and not getattr(m, "inplace", False))
        )
        for m in model
    )


def _factors(norms: torch.Tensor, clip: float | None) -> torch.Tensor:
    if clip is None:
        return torch.ones_like(norms)
    return (clip / (norms + CLIP_EPS)).clamp(max=1.0)


def _materialized(loss, params, x, y, clip, mask=None, summed=True) -> ClippedGrads:
    """Per-example gradients with torch.func, then clip and sum (weighted by ``mask``);
    ``summed=False``: the norms and the loss only (no clip, no sum).  A network that ``vmap``
    cannot batch (its forward pass reads a value: ``.item()``, ``.tolist()``, ``if x.max() > …``,
    or indexes by a mask) has its examples' gradients taken one after another from then on
    (:func:`_one_by_one`, ``loss.one_by_one``; tens of times slower, said in the log)."""
    if getattr(loss, "one_by_one", False):
        grads, losses = _one_by_one(loss, params, x, y)
    else:
        try:
            grads, losses = vmap(grad_and_value(loss), in_dims=(None, 0, 0))(params, x, y)
        except RuntimeError as err:
            loss.one_by_one = True
            why = str(err).split("\n", 1)[0][:120]
            if why not in _said:
                _said.add(why)
                log.warning(
                    "dplab: vmap cannot batch this network (%s): each example's gradient is"
                    " taken alone, one after another (tens of times slower)",
                    why,
                )
            grads, losses = _one_by_one(loss, params, x, y)
    flat = torch.cat([g.reshape(len(x), -1) for g in grads.values()], dim=1)
    norms = flat.norm(dim=1)
    if not summed:
        return ClippedGrads({}, norms, losses.sum())
    factor = _factors(norms, clip)
    if mask is not None:
        factor, losses = factor * mask, losses * mask
    summed = {k: torch.einsum("b,b...->...", factor, g) for k, g in grads.items()}
    return ClippedGrads(summed, norms, losses.sum())


#: why vmap could not batch a network, each said once in the log (:func:`_materialized`)
_said: set[str] = set()


def _one_by_one(loss, params, x, y) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Each example's gradient and loss by plain autograd, one example at a time (any Python the
    forward pass runs: a value read, numpy), stacked as ``vmap`` would."""
    grads, losses = {k: [] for k in params}, []
    for i in range(len(x)):
        p = {k: v.detach().requires_grad_() for k, v in params.items()}
        with torch.enable_grad():
            value = loss(p, x[i], y[i])
            for k, g in zip(p, torch.autograd.grad(value, list(p.values()), allow_unused=True)):
                grads[k].append(torch.zeros_like(p[k]) if g is None else g)
        losses.append(value.detach())
    return {k: torch.stack(g) for k, g in grads.items()}, torch.stack(losses)


@dataclass(frozen=True)
class GhostLayer:
    """How ghost clipping treats one layer type (Opacus's per-layer norm-sampler registry).

    ``norms(module, a, g, sq)``, from the layer's input a and output gradient g (batch first),
    adds each example's squared gradient norm (weight, then bias) to ``sq`` in place and returns
    the layer's book-keeping part (a, g, per): a (B, k) with g (B, p), or a (B, k, T) with g
    (B, p, T), and the materialized per-example weight gradients ``per`` (B, p, k) or ``None``
    (then a is ``None`` only where ``per`` is set).  The clipped sum is shared by all layers."""

    supports: Callable[[nn.Module], bool]
    norms: Callable[[nn.Module, torch.Tensor, torch.Tensor, torch.Tensor], tuple]


#: layer type → its :class:`GhostLayer`; a model with a parameter in any other layer type takes
#: the torch.func path (:func:`ghost_supported`)
GHOST_LAYERS: dict[type[nn.Module], GhostLayer] = {}


def ghost_layer(
    layer_type: type[nn.Module], supports: Callable[[nn.Module], bool] = lambda m: True
):
    """Decorator: register ``norms`` (see :class:`GhostLayer`) for ``layer_type`` (exact type),
    for the modules where ``supports(module)`` holds."""

    def register(norms):
        GHOST_LAYERS[layer_type] = GhostLayer(supports, norms)
        return norms

    return register


@ghost_layer(nn.Linear)
def _linear_norms(m: nn.Linear, a: torch.Tensor, g: torch.Tensor, sq: torch.Tensor) -> tuple:
    """Linear on (B, d): ||a_i||²·||g_i||² (ghost norm); on (B, ..., d): as a sequence (B, d, T)."""
    if a.dim() != 2:  # (B, ..., d) → (B, d, T)
        batch = len(a)
        a = a.reshape(batch, -1, a.shape[-1]).transpose(1, 2)
        g = g.reshape(batch, -1, g.shape[-1]).transpose(1, 2)
    if a.dim() == 2:
        g_sq = _sq_norms(g)
        sq += _sq_norms(a) * g_sq
        if m.bias is not None:
            sq += g_sq
        return a, g, None
    w_sq, per = _sequence_sq_norms(a, g)
    sq += w_sq
    _add_bias_sq(m, g, sq)
    return a, g, per


@ghost_layer(
    nn.Conv2d,
    supports=lambda m: (
        m.groups == 1 and m.padding_mode == "zeros" and not isinstance(m.padding, str)
    ),
)
def _conv2d_norms(m: nn.Conv2d, a: torch.Tensor, g: torch.Tensor, sq: torch.Tensor) -> tuple:
    """Conv2d: per-example gradients by one grouped convolution where cheaper
    (:func:`_grouped_cheaper`), else the unfolded patches as a sequence (B, k, T)."""
    if _grouped_cheaper(a, g, m):
        per = _conv_per_example(a, g, m)
        sq += _sq_norms(per)
        _add_bias_sq(m, g.flatten(2), sq)
        return None, g.flatten(2), per
    a, g = _unfold(a, m), g.flatten(2)
    w_sq, per = _sequence_sq_norms(a, g)
    sq += w_sq
    _add_bias_sq(m, g, sq)
    return a, g, per


def _add_bias_sq(m: nn.Module, g: torch.Tensor, sq: torch.Tensor) -> None:
    """sq += ||∇_b ℓ_i||² = ||Σ_t g_{i,t}||² for a layer with a bias, g of shape (B, p, T)."""
    if m.bias is not None:
        sq += _sq_norms(g.sum(2))


def _ghost(model, l2, params, x, y, clip, mask=None, summed=True) -> ClippedGrads | None:
    """The ghost-clipping path (module docstring), each factor c_i times ``mask_i`` if given;
    ``None`` when a layer ran more than once; ``summed=False``: the norms and the loss only (no
    clipped sum)."""
    if not x.is_floating_point():
        return None
    plan = _plan(model)
    plain = {k: _detached(v) for k, v in params.items()}
    passed = plan.stack is not None and _stack_pass(plan, plain, _detached(x), y)
    if passed:
        ce, ce_sum, recorded, out_grads = passed
    else:
        with torch.enable_grad():
            forward = _hooked_forward(model, plan, plain, x, y)
            if forward is None:
                return None  # a layer called twice, or its input/output changed in place later
            ce, recorded = forward
            # the summed losses' gradient: handing autograd the ones as grad_outputs instead saves
            # two operations but makes it import torch.fx's symbolic shapes and sympy (0.28 s a job)
            ce_sum = ce.sum()
            out_grads = torch.autograd.grad(ce_sum, [z for _, _, z in recorded], allow_unused=True)

    batch = len(x)
    sq = torch.zeros(batch, dtype=ce.dtype, device=ce.device)
    cross = torch.zeros_like(sq) if l2 else None  # ⟨θ, g_i^CE⟩, needed only with an L2 term
    parts = []  # (module, a, g, per-example weight grads or None); a, g: (B, d) or (B, ·, T)
    out_grads = list(out_grads)
    while recorded:  # (popped: each layer output is freed once used)
        (m, a, z), g = recorded.pop(0), out_grads.pop(0)
        if g is None:
            g = torch.zeros_like(z)
        if l2:
            cross += (g * z.detach()).reshape(batch, -1).sum(1)
        a, g, per = GHOST_LAYERS[type(m)].norms(m, a, g, sq)
        parts.append((m, a, g, per))

    theta_sq = sum((p * p).sum() for p in plain.values()) if l2 else 0.0
    if l2:  # the cross term can make the sum negative by rounding; without it, sq ≥ 0 already
        sq = (sq + 2.0 * l2 * cross + l2 * l2 * theta_sq).clamp(min=0.0)
    norms = sq.sqrt()
    ce_sum = _detached(ce_sum)  # Σ_i ℓ_i^CE, the sum the output gradients came from
    if not summed:
        return ClippedGrads({}, norms, ce_sum)
    factor = _factors(norms, clip)
    if mask is not None:
        factor, ce_sum = factor * mask, _detached(ce * mask).sum()

    grad_sum = {}
    while parts:
        m, a, g, per = parts.pop(0)  # each layer's a, g are freed once summed
        weight, bias = plan.keys[m]
        if per is not None:
            w = torch.einsum("b,bpk->pk", factor, per)
        elif a.dim() == 2:
            w = (g * factor[:, None]).t().mm(a)
        else:
            w = torch.einsum("bpt,bkt->pk", g * factor[:, None, None], a)
        grad_sum[weight] = w if w.shape == m.weight.shape else w.reshape(m.weight.shape)
        if bias is not None:
            grad_sum[bias] = factor @ (g if g.dim() == 2 else g.sum(2))
    if l2:
        total = factor.sum()
        grad_sum = {k: v + l2 * total * plain[k] for k, v in grad_sum.items()}
    grad_sum = {k: grad_sum[k] for k in params}
    loss_sum = ce_sum
    if l2:
        loss_sum = loss_sum + 0.5 * l2 * theta_sq * (batch if mask is None else mask.sum())
    return ClippedGrads(grad_sum, norms, loss_sum)  # norms: of graph-free tensors, no history


def _detached(t: torch.Tensor) -> torch.Tensor:
    """``t`` without autograd history: itself where it has none (no operation dispatched)."""
    return t.detach() if t.requires_grad else t


def _stack_pass(plan: _Plan, plain, x, y) -> tuple | None:
    """Forward and backward pass of a :attr:`_Plan.stack` model without autograd, hooks or
    ``functional_call``: (per-example losses ℓ_i, Σ_i ℓ_i, [(layer, input a, output z)],
    [∂(Σ_i ℓ_i)/∂z per layer]), by the ATen operations that the model's forward pass and autograd's
    backward pass of Σ_i ℓ_i run (the same bits; :data:`STACK_MODULES`).  ``None`` where a Linear's
    input is not (B, d) or the targets are not (B,) class indices (the general path then takes the
    step).  ``x`` and the parameters ``plain`` carry no autograd history."""
    if y.dtype != torch.int64 or y.dim() != 1:
        return None
    h, tape = x, []  # tape: (module, input, output) from the first Linear layer on
    for m in plan.stack:
        if type(m) is nn.Linear:
            if h.dim() != 2:
                return None
            weight, bias = plan.keys[m]
            out = nn.functional.linear(h, plain[weight], None if bias is None else plain[bias])
        else:
            out = m.forward(h)  # as the Linear layers: no hooks (the stack has none)
            if not tape:
                h = out  # before the first Linear layer: no gradient needed
                continue
        tape.append((m, h, out))
        h = out
    # F.cross_entropy(h, y, reduction="none"), then the backward of its sum as autograd runs it
    log_p = torch.log_softmax(h, 1)
    ce, total_weight = _ATEN.nll_loss_forward(log_p, y, None, 0, -100)
    ce_sum = ce.sum()
    ones = torch.ones_like(ce_sum).expand(len(h))
    g = _ATEN.nll_loss_backward(ones, log_p, y, None, 0, -100, total_weight)
    g = _ATEN._log_softmax_backward_data(g, log_p, 1, h.dtype)
    recorded, out_grads = [], []
    for i in range(len(tape) - 1, -1, -1):
        m, a, out = tape[i]
        if type(m) is nn.Flatten:
            continue  # from dimension 1 of a (B, d) tensor: the tensor itself
        if type(m) is not nn.Linear:
            g = STACK_MODULES[type(m)](m, g, a, out)
            continue
        recorded.append((m, a, out))
        out_grads.append(g)
        if i:  # ∂/∂a of a·Wᵀ as autograd's mm_mat1_backward: column-major a gets a column-major g
            w = plain[plan.keys[m][0]]
            column_major = a.stride(0) == 1 and a.stride(1) == a.shape[0]
            g = w.t().mm(g.t()).t() if column_major else g.mm(w)
    return ce, ce_sum, recorded[::-1], out_grads[::-1]


def _hooked_forward(model, plan: _Plan, plain, x, y) -> tuple | None:
    """The forward pass through ``functional_call`` with a hook on each layer of the plan:
    (per-example losses, [(layer, input a, output z)] in call order); ``None`` when a layer ran
    more than once or its input or output was changed in place afterwards."""
    records: dict[nn.Module, list] = {m: [] for m in plan.layers}

    def hook(module, inputs, output):
        records[module].append((inputs[0].detach(), output, inputs[0]._version, output._version))

    handles = [m.register_forward_hook(hook) for m in plan.layers]
    try:
        # x as a graph root makes every layer output a non-leaf; x's own gradient is never computed
        logits = functional_call(model, plain, (x.detach().requires_grad_(),))
    finally:
        for h in handles:
            h.remove()
    ce = nn.functional.cross_entropy(logits, y, reduction="none")
    if any(
        len(r) > 1 or (r and (r[0][0]._version, r[0][1]._version) != r[0][2:])
        for r in records.values()
    ):
        return None
    return ce, [(m, r[0][0], r[0][1]) for m, r in records.items() if r]


def _sq_norms(t: torch.Tensor) -> torch.Tensor:
    """Squared norm of each row t[i] (no temporary the size of t)."""
    return torch.linalg.vector_norm(t.flatten(1), dim=1).square()


def _unfold(a: torch.Tensor, conv: nn.Conv2d) -> torch.Tensor:
    """The (B, C·kh·kw, T) patches of ``conv``'s input (``F.unfold``'s layout, which matches
    ``weight.reshape(out, -1)``), by one strided copy (much faster than ``F.unfold`` on CPU)."""
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (
        conv.kernel_size,
        conv.dilation,
        conv.padding,
        conv.stride,
    )
    a = nn.functional.pad(a, (pw, pw, ph, ph)) if ph or pw else a.contiguous()
    b, c, h, w = a.shape
    ho, wo = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
    sb, sc, sy, sx = a.stride()
    view = a.as_strided((b, c, kh, kw, ho, wo), (sb, sc, dh * sy, dw * sx, sh * sy, sw * sx))
    return view.reshape(b, c * kh * kw, ho * wo)


def _grouped_cheaper(a: torch.Tensor, g: torch.Tensor, conv: nn.Conv2d) -> bool:
    """Whether :func:`_conv_per_example` is the cheapest way to this layer's norms: where
    :func:`grouped_wins` says so for the device, and unless the Gram trick is cheaper (output
    positions T with T·(k + p) < k·p)."""
    k, p = conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1], conv.out_channels
    positions = g.shape[-2] * g.shape[-1]
    return grouped_wins(a.device, conv.in_channels) and positions * (k + p) >= k * p


def grouped_wins(device: torch.device, in_channels: int) -> bool:
    """Whether per-example conv weight gradients by one grouped convolution (batch as groups)
    beat unfold + bmm on ``device`` (``benchmarks/conv_per_example.py [--device cuda]`` times both):

    - CPU (oneDNN): for 8–32 input channels, where it measured 1.3–2.4× faster (fewer or more
      channels: slower; benchmarks/README.md);
    - CUDA: on Volta (compute capability 7.0) and newer, where cuDNN's grouped weight gradient is
      reported faster than unfold + matmul and about 30% leaner (it never holds the unfolded
      patches), but about 40% slower on older GPUs (Opacus maintainers, pytorch/opacus's
      GitHub tracker #145;
      torch.func's convolution batching rule takes the same grouped route).  On one H200
      (benchmarks/README.md, "GPU") both took 0.08–0.13 ms at batch 128, unfold ahead by
      0.02–0.03 ms for 3–32 input channels and grouped ahead at 1: launch-sized differences from
      one run, so the leaner grouped route stays;
    - anything else: unfold + bmm."""
    if device.type == "cpu":
        return 8 <= in_channels <= 32
    if device.type == "cuda":
        return torch.cuda.get_device_capability(device)[0] >= 7
    return False


def _conv_per_example(a: torch.Tensor, g: torch.Tensor, conv: nn.Conv2d) -> torch.Tensor:
    """Per-example weight gradients (B, out, in·kh·kw) of ``conv`` from its input a and output
    gradient g: the weight gradient of one convolution with the batch as groups (input
    (1, B·in, H, W), output gradient (1, B·out, H', W'), groups = B)."""
    b = len(a)
    weight = a.new_empty((b * conv.out_channels, conv.in_channels, *conv.kernel_size))  # shape only
    per = torch.ops.aten.convolution_backward(
        g.reshape(1, b * conv.out_channels, *g.shape[2:]),
        a.reshape(1, b * conv.in_channels, *a.shape[2:]),
        weight,
        None,
        list(conv.stride),
        list(conv.padding),
        list(conv.dilation),
        False,
        [0, 0],
        b,
        [False, True, False],
    )[1]
    return per.reshape(b, conv.out_channels, -1)


def _sequence_sq_norms(
    a: torch.Tensor, g: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """||Σ_t g_t a_tᵀ||² per example for a (B, k, T), g (B, p, T): by the Gram trick when
    T·(k + p) < k·p (returns no per-example gradients), else from the materialized (B, p, k)."""
    k, t = a.shape[1:]
    p = g.shape[1]
    if t * (k + p) < k * p:
        gram = torch.bmm(a.transpose(1, 2), a) * torch.bmm(g.transpose(1, 2), g)
        return gram.sum((1, 2)), None
    per = torch.bmm(g, a.transpose(1, 2))
    return _sq_norms(per), per
