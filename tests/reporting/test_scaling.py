"""The scaling analysis on runs with known answers: power laws E + A·N^-α recovered from synthetic
losses, the crossing of two curves found where the algebra puts it, and a sweep directory laid out
as python -m src.study writes one (two stages, arms x sizes) analysed end to end by the CLI."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from src.report import main as report_main
from src.studies.power_law import PowerLaw, PowerLawError, bootstrap_fit, crossings, fit_power_law
from tests.reporting.fake_runs import completed, write_run

#: what ``src.report scaling`` writes for L(N) per arm
L_OF_N_FILES = {
    "scaling.md",
    "scaling.csv",
    "scaling_points.csv",
    "scaling_crossings.csv",
    "scaling.png",
}


def scaling_main(argv: list[str]) -> dict:
    """``python -m src.report scaling <argv>``."""
    return report_main(["scaling", *argv])


SIZES = (1e4, 4e4, 1.6e5, 6.4e5)
ALPHA = 0.3
# equal exponents: the curves cross where (A_pre - A_post) N^-α = E_post - E_pre
PRE = PowerLaw(E=1.3, A=26.32, alpha=ALPHA)
POST = PowerLaw(E=1.5, A=20.0, alpha=ALPHA)
CROSS = ((PRE.A - POST.A) / (POST.E - PRE.E)) ** (1 / ALPHA)  # ~1.0e5, inside the sizes


def noisy(law: PowerLaw, sd: float, seeds: int = 3, rng_seed: int = 0) -> dict[float, list[float]]:
    rng = np.random.default_rng(rng_seed)
    return {n: list(law(n) + rng.normal(0.0, sd, seeds)) for n in SIZES}


def test_exact_points_give_back_the_law() -> None:
    law = fit_power_law(SIZES, [PRE(n) for n in SIZES])
    assert law.E == pytest.approx(PRE.E, abs=1e-4)
    assert law.A == pytest.approx(PRE.A, rel=1e-3)
    assert law.alpha == pytest.approx(ALPHA, abs=1e-4)


def test_noisy_seeds_recover_alpha_and_its_interval_narrows_with_less_noise() -> None:
    fit = bootstrap_fit(noisy(PRE, 0.005), n_boot=200, seed=0)
    assert fit.law.alpha == pytest.approx(ALPHA, abs=0.03)
    assert fit.law.E == pytest.approx(PRE.E, abs=0.05)
    lo, hi = fit.interval("alpha")  # type: ignore[misc]
    assert lo < fit.law.alpha < hi and lo < ALPHA < hi
    assert fit.means == pytest.approx([np.mean(v) for v in noisy(PRE, 0.005).values()])
    tight = bootstrap_fit(noisy(PRE, 0.001), n_boot=200, seed=0).interval("alpha")
    assert tight is not None and tight[1] - tight[0] < (hi - lo) / 2
    assert len(fit.replicates) + fit.failed == 200


def test_one_seed_per_size_has_no_interval_and_two_sizes_are_refused() -> None:
    fit = bootstrap_fit({n: [PRE(n)] for n in SIZES}, n_boot=100)
    assert fit.replicates == [] and fit.interval("alpha") is None
    with pytest.raises(PowerLawError, match="at least 3 distinct sizes"):
        fit_power_law([1e4, 1e4, 4e4], [2.0, 2.1, 1.9])


def test_crossing_of_two_fitted_curves_is_where_the_algebra_puts_it() -> None:
    exact = crossings(PRE, POST, 1e2, 1e8)
    assert len(exact) == 1 and exact[0] == pytest.approx(CROSS, rel=1e-6)
    fitted = crossings(
        bootstrap_fit(noisy(PRE, 0.005, rng_seed=1), 0).law,
        bootstrap_fit(noisy(POST, 0.005, rng_seed=2), 0).law,
        1e2,
        1e8,
    )
    assert len(fitted) == 1 and fitted[0] == pytest.approx(CROSS, rel=0.15)
    parallel = PowerLaw(E=PRE.E + 0.1, A=PRE.A, alpha=ALPHA)  # always 0.1 above: never crosses
    assert crossings(PRE, parallel, 1e2, 1e8) == []


# --------------------------------------------------------------------------- a sweep directory
ARM, SIZE = "experiment/study_scaling/arm", "experiment/study_scaling/size"
NAMES = ("l2_d32", "l2_d48", "l3_d64", "l4_d80")
LRS = ("0.001", "0.003", "0.01")
CHOSEN = {"pre_learned": "0.003", "post_learned": "0.001"}  # the lowest val/loss in the tune stage
PROTOCOL = {
    "factors": [ARM, SIZE],
    "tune": {"optim.lr": [1e-3, 3e-3, 1e-2]},
    "design": "two_stage",
    "tune_seeds": [0],
    "seeds": [1, 2, 3],
    "baseline": f"{ARM}=pre_learned,{SIZE}=l4_d80",
    "comparisons": "one_factor",
}


def scaling_sweep(root: Path) -> Path:
    """Arms pre_learned / post_learned at 4 sizes: tune (3 lrs, seed 0), confirm (chosen lr, seeds 1-3).
    Test losses follow PRE / POST at the chosen lr; every other lr scores 9.0 on test, so a point
    taken from the wrong runs would wreck the fit."""
    rng = np.random.default_rng(3)
    for arm, law in (("pre_learned", PRE), ("post_learned", POST)):
        for name, n in zip(NAMES, SIZES):
            variant = [f"+{ARM}={arm}", f"+{SIZE}={name}"]
            for lr in LRS:
                val = law(n) + (0.0 if lr == CHOSEN[arm] else 0.3)
                write_run(
                    root,
                    [*variant, f"optim.lr={lr}", "protocol.stage=tune", "seed=0"],
                    config={"protocol": {**PROTOCOL, "stage": "tune"}},
                    metrics=completed(val, 9.0),
                    budget={"params": n},
                )
            for seed in (1, 2, 3):
                loss = float(law(n) + rng.normal(0.0, 0.004))
                write_run(
                    root,
                    [*variant, f"optim.lr={CHOSEN[arm]}", "protocol.stage=confirm", f"seed={seed}"],
                    config={"protocol": {**PROTOCOL, "stage": "confirm"}},
                    metrics=completed(loss + 0.01, loss),
                    budget={"params": n},
                )
    return root


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_sweep_directory_end_to_end(tmp_path: Path) -> None:
    files = scaling_main(
        [str(scaling_sweep(tmp_path / "sweep")), "--out", str(tmp_path / "out"), "--boot", "200"]
    )
    assert set(files) == L_OF_N_FILES
    assert all(p.exists() and p.stat().st_size > 0 for p in files.values())
    points = rows(files["scaling_points.csv"])
    assert len(points) == 2 * 4 * 3  # confirm runs only, at the chosen learning rate
    assert {(p["arm"], p["chosen"]) for p in points} == {
        (a, f"optim.lr={lr}") for a, lr in CHOSEN.items()
    }
    assert all(float(p["loss"]) < 4 for p in points) and {p["seed"] for p in points} == {
        "1",
        "2",
        "3",
    }
    fits = {r["arm"]: r for r in rows(files["scaling.csv"])}
    assert list(fits) == ["pre_learned", "post_learned"]  # the baseline arm first
    for arm, law in (("pre_learned", PRE), ("post_learned", POST)):
        r = fits[arm]
        assert float(r["alpha"]) == pytest.approx(law.alpha, abs=0.03) and float(
            r["E"]
        ) == pytest.approx(law.E, abs=0.06)
        assert float(r["alpha_ci_low"]) < float(r["alpha"]) < float(r["alpha_ci_high"])
        assert (
            int(r["n_sizes"]) == 4
            and float(r["params_min"]) == SIZES[0]
            and float(r["params_max"]) == SIZES[-1]
        )
    (cross,) = rows(files["scaling_crossings.csv"])
    (at,) = [float(x) for x in cross["crossing_params"].split(";")]
    assert at == pytest.approx(CROSS, rel=0.15) and cross["inside_range"] == "True"
    assert float(cross["boot_share_inside"]) > 0.9
    text = files["scaling.md"].read_text()
    # found without --size: the key along which N changes 64x
    assert f"size factor `{SIZE}`" in text
    assert "| l2_d32 | 1e+04 | post_learned < pre_learned |" in text
    assert "| l4_d80 | 6.4e+05 | pre_learned < post_learned |" in text
    assert "The ranking **changes** across the range." in text


def test_size_key_that_does_not_vary_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as e:
        scaling_main(
            [str(scaling_sweep(tmp_path / "sweep")), "--size", "model.n_layer", "--boot", "0"]
        )
    assert e.value.code == 2


def test_ranking_that_holds_is_said_to_hold(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    for arm, law in (("pre_learned", PRE), ("post_learned", PowerLaw(PRE.E + 0.1, PRE.A, ALPHA))):
        for name, n in zip(NAMES, SIZES):
            for seed in (1, 2):
                write_run(
                    root,
                    [f"+{ARM}={arm}", f"+{SIZE}={name}", f"seed={seed}"],
                    metrics=completed(law(n), law(n) + 0.001 * seed),
                    budget={"params": n},
                )
    files = scaling_main(
        [str(root), "--size", SIZE, "--boot", "50", "--out", str(tmp_path / "out")]
    )
    text = files["scaling.md"].read_text()
    assert "is the same at every size" in text and "none within ×100 of the range" in text
    (cross,) = rows(files["scaling_crossings.csv"])
    assert cross["crossing_params"] == "" and cross["inside_range"] == "False"
    assert not math.isnan(float(rows(files["scaling.csv"])[1]["alpha"]))


def test_a_crossing_within_ten_times_beyond_the_largest_size_is_named(tmp_path: Path) -> None:
    """Issue 29 asks whether the fitted curves would cross within 10x beyond the largest size: two laws built to
    cross at 2.5e6 (3.9x the largest size, 6.4e5) are reported as crossing there, not inside the range."""
    target = 2.5e6
    post = PowerLaw(E=PRE.E + 0.2, A=PRE.A - 0.2 * target**ALPHA, alpha=ALPHA)
    root = tmp_path / "sweep"
    for arm, law in (("pre_learned", PRE), ("post_learned", post)):
        for name, n in zip(NAMES, SIZES):
            for seed in (1, 2, 3):
                write_run(
                    root,
                    [f"+{ARM}={arm}", f"+{SIZE}={name}", f"seed={seed}"],
                    metrics=completed(law(n), law(n) + 1e-4 * seed),
                    budget={"params": n},
                )
    files = scaling_main(
        [str(root), "--size", SIZE, "--boot", "100", "--out", str(tmp_path / "out")]
    )
    (cross,) = rows(files["scaling_crossings.csv"])
    (at,) = [float(x) for x in cross["crossing_params"].split(";")]
    assert at == pytest.approx(target, rel=0.05)
    assert cross["inside_range"] == "False" and cross["beyond_10x"] == "True"
    assert float(cross["boot_share_beyond_10x"]) > 0.9 and float(cross["boot_share_inside"]) < 0.1
    assert "learned | 2.5e+06 | no | 0 % | yes | 100 % |" in files["scaling.md"].read_text()
