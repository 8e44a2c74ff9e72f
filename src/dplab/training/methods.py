"""The training methods of docs/training.md as data: what each one plugs into
the one loop of :mod:`dplab.training.loop` (sampler, noise, normalisation, update, projection).

=====================  =====================================  ==========================================
method                 source                                 update (g = Σ clip(∇ℓ_i) over the batch B)
=====================  =====================================  ==========================================
sgd                    003 Alg. 1                             w ← w − η·mean(∇ℓ_i)  (no clip, no noise)
dp_sgd                 003 Alg. 2; 000 Alg. 1 (Abadi et al.)  w ← w − η·(g + σC·Z)/b, Poisson batches
dp_gd                  004 §3.1–3.3                           w ← w − η·(g + σC·Z)/n, full batch
noisy_gd               002 Alg. 1                             w ← Π(w − η·(g + σC·Z)/n); √(2η)σ₀₀₂ = ησC/n
dp_sgd_fixed_batches   000 Alg. 2                             disjoint fixed batches cycled, (g + σC·Z)/b
projected_dp_sgd       001 eq. (1), (12)                      w ← Π_D(w − η·g/|B| + σ_A·Z), σ_A = ησC/b
regularized_dp_sgd     001 eq. (16)–(17)                      w ← (1−λ)w − η·g/|B| + σ_A·Z
dp_mf                  004 §4.3 (training.dp_mf)              w ← w − η·(g + (C⁻¹Z)_t)/b, MF samplers
=====================  =====================================  ==========================================
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Method:
    name: str
    source: str
    private: bool
    samplings: tuple[str, ...]  # allowed; the first one is the default
    normalize: str  # default: "expected" (÷ b) or "realized" (÷ |B|, 001 eq. 12)
    projection: str  # "none", "optional" or "required" (ball of diameter D)
    regularized: bool  # uses `regularization` (001 eq. 17)
    accountant: str | None  # default accountant for calibrating σ from target_epsilon


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("sgd", "003 Alg. 1", False, ("shuffle", "without_replacement", "poisson", "full_batch", "balls_in_bins"), "expected", "none", False, None),
        Method("dp_sgd", "003 Alg. 2; 000 Alg. 1", True, ("poisson", "without_replacement", "shuffle", "balls_in_bins"), "expected", "none", False, "rdp"),
        Method("dp_gd", "004 §3.1–3.3", True, ("full_batch",), "expected", "optional", False, "rdp"),
        Method("noisy_gd", "002 Alg. 1", True, ("full_batch",), "expected", "optional", False, "rdp"),
        Method("dp_sgd_fixed_batches", "000 Alg. 2", True, ("shuffle",), "expected", "none", False, "pabi"),
        Method("projected_dp_sgd", "001 eq. (1), (12)", True, ("poisson", "without_replacement"), "realized", "required", False, "asoodeh_projected"),
        Method("regularized_dp_sgd", "001 eq. (16)-(17)", True, ("without_replacement", "poisson"), "realized", "none", True, "asoodeh_regularized"),
        Method("dp_mf", "004 §4.3; Choquette-Choo et al. 2023", True, ("min_separation", "cyclic_poisson"), "expected", "none", False, "mf"),
    )
}
