"""A Snakemake DAG's job times by job class, from the log of a (possibly interrupted) run.

    snakemake -n --configfile config/paper.yaml > dry.txt          # every job of the DAG
    snakemake --cores 16 --configfile config/paper.yaml > run.txt 2>&1   # timed, may be cut short
    python benchmarks/dag_times.py dry.txt run.txt

A job's time is from the timestamp Snakemake prints before its ``rule …:`` block to the one before
its ``Finished jobid: N``, to the second.  A class is the rule, and for training jobs the run's
folder without its ε and seed (``train grids/<grid>/<dataset>/<model>/<variant>``) or
``train runs``; for audits the audit's name.  Per class: jobs in the DAG, jobs finished, their
mean and summed seconds, and the class's total extrapolated from the mean where not all
finished (marked ``*``).  A job still running when the log ends counts as not finished.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from datetime import datetime

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]$")


def jobs(text: str) -> dict[str, dict]:
    """jobid → {class, start, end} from a Snakemake log (dry-run logs: no end)."""
    found, stamp, current = {}, None, None
    for line in text.splitlines():
        if m := STAMP.match(line.strip()):
            stamp = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
        elif m := re.match(r"^(?:local)?rule (\w+):", line):
            current = {"rule": m.group(1), "start": stamp, "end": None, "output": ""}
        elif current is not None and (
            m := re.match(r"^\s+output: (\S+?),?$", line) or re.match(r"^\s+output: (\S+?),", line)
        ):
            current["output"] = m.group(1)
        elif current is not None and (m := re.match(r"^\s+jobid: (\d+)", line)):
            found[m.group(1)] = current
            current = None
        elif m := re.match(r"^Finished jobid: (\d+)", line):
            if m.group(1) in found:
                found[m.group(1)]["end"] = stamp
    return found


def job_class(job: dict) -> str:
    out = job["output"].removeprefix("results/")
    if job["rule"] == "train":
        if out.startswith("grids/"):
            return "train " + "/".join(out.split("/")[:5])
        return "train runs"
    if job["rule"] == "audit":
        return "audit " + out.split("/")[1] if "/" in out else "audit"
    return job["rule"]


def table(dry: dict[str, dict], run: dict[str, dict]) -> str:
    counts = defaultdict(int)
    for job in dry.values():
        counts[job_class(job)] += 1
    times = defaultdict(list)
    for job in run.values():
        if job["end"] is not None and job["start"] is not None:
            times[job_class(job)].append((job["end"] - job["start"]).total_seconds())
    lines = [
        "| class | jobs | finished | mean s | summed s | class total s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    grand = 0.0
    for name in sorted(counts, key=lambda c: -sum(times.get(c, [0]))):
        done = times.get(name, [])
        mean = sum(done) / len(done) if done else float("nan")
        total = mean * counts[name] if done else float("nan")
        grand += 0.0 if total != total else total
        mark = "" if len(done) == counts[name] else "*"
        lines.append(
            f"| {name} | {counts[name]} | {len(done)} | {mean:.1f} | {sum(done):.0f} |"
            f" {total:.0f}{mark} |"
        )
    lines.append(
        f"| all | {sum(counts.values())} | {sum(map(len, times.values()))} | | | {grand:.0f} |"
    )
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    dry, run = (jobs(open(path).read()) for path in argv[:2])
    print(table(dry, run))


if __name__ == "__main__":
    main(sys.argv[1:])
