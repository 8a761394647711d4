#!/usr/bin/env python3
"""gpupool's ``scontrol`` inside a batch job: ``scontrol show hostnames [LIST]`` (default:
``$SLURM_JOB_NODELIST``), one host a line; nothing else."""

import os
import re
import sys


def expand(text: str) -> list[str]:
    out: list[str] = []
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", text):
        m = re.match(r"^(.*?)\[([^\]]+)\](.*)$", item)
        if m is None:
            out.append(item)
            continue
        for run in m[2].split(","):
            a, _, b = run.partition("-")
            for n in range(int(a), int(b or a) + 1):
                out += expand(f"{m[1]}{n:0{len(a)}d}{m[3]}")
    return out


def main() -> None:
    words = sys.argv[1:]
    if len(words) >= 2 and words[0] == "show" and words[1] in ("hostnames", "hostname"):
        listed = words[2] if len(words) > 2 else os.environ.get("SLURM_JOB_NODELIST", "")
        try:
            print("\n".join(expand(listed)), flush=True)
        except BrokenPipeError:  # | head -n1 read what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    sys.exit("scontrol: gpupool's scontrol knows 'show hostnames [LIST]' only (docs/slurm.md)")


if __name__ == "__main__":
    main()
