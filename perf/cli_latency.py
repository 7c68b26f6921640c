"""How long a mistyped command waits for its one-line answer, against ``python -c "import
lightning"`` on the same machine in the same run.

Subjects, each a fresh process, repeats interleaved (A B C …, order rotated):

* a misspelt key: ``python -m src.train model.norm_placment=post``;
* a wrong group value: ``python -m src.train model/position=rotary``;
* a misspelt key given to each other Hydra entry point (``src.eval``, ``src.generate``,
  ``src.prepare``, ``src.inspect``), which share one entry decorator (``src.cli.hydra_entry``);
* the peer: ``python -c "import lightning"`` (what any entry point that imports Lightning first
  pays before it can say anything).

Each subject's median wall time is reported; the target is a ratio below 1 for both errors (the
entry points check the command line before the training stack loads: src/config/preflight.py).
Every run of an error subject must exit 1 with one line naming the key and a did-you-mean.

    python perf/cli_latency.py              # 5 repeats
    python perf/cli_latency.py --quick      # 1 repeat (the smoke test)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

from perf.common import REPO_ROOT, base_parser, machine_header, median, spread, table, verdict

SUBJECTS: dict[str, tuple[list[str], str | None]] = {
    "misspelt key": (
        ["-m", "src.train", "model.norm_placment=post"],
        "did you mean model.norm_placement?",
    ),
    "wrong group value": (["-m", "src.train", "model/position=rotary"], "did you mean rope?"),
    **{
        f"misspelt key, src.{entry}": (["-m", f"src.{entry}", typo], f"did you mean {key}?")
        for entry, typo, key in (
            ("eval", "limt=5", "limit"),
            ("generate", "max_new_tokns=5", "max_new_tokens"),
            ("prepare", "num_prc=2", "num_proc"),
            ("inspect", "seq_lne=5", "seq_len"),
        )
    },
    'python -c "import lightning"': (["-c", "import lightning"], None),
}
PEER = 'python -c "import lightning"'


def run(args: list[str], expect: str | None) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    r = subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, capture_output=True, text=True, env=env
    )
    if expect is None:
        if r.returncode != 0:
            raise SystemExit(f"cli_latency: the peer failed: {r.stderr.strip()[-500:]}")
        return
    lines = r.stderr.strip().splitlines()
    if r.returncode != 1 or len(lines) != 1 or expect not in lines[0]:
        raise SystemExit(
            f"cli_latency: {' '.join(args)} should exit 1 with one line containing {expect!r}; "
            f"got rc {r.returncode}: {r.stderr.strip()[-500:]}"
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = base_parser(__doc__.split("\n\n")[0])
    args = p.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 5)
    print(machine_header("cli_latency: a mistyped command's answer vs importing Lightning"))
    names = list(SUBJECTS)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeats):
        for n in names[r % len(names) :] + names[: r % len(names)]:
            t0 = time.perf_counter()
            run(*SUBJECTS[n])
            times[n].append(time.perf_counter() - t0)
    peer = median(times[PEER])
    rows = [
        [n, median(times[n]), spread(times[n]), "-" if n == PEER else median(times[n]) / peer]
        for n in names
    ]
    print(table(["command", "median s", "spread", "vs import lightning"], rows))
    result = {n: median(times[n]) / peer for n in names if n != PEER}
    for n, ratio in result.items():
        print(f"{n}: {verdict(ratio, 1.0, higher_is_better=False)}")
    return result


if __name__ == "__main__":
    main()
