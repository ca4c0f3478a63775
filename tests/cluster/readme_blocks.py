#!/usr/bin/python3
"""The README as a reader uses it.

1. Every relative link in README.md and docs/ resolves: the file exists, and an anchor
   names a heading of it (GitHub's slugs).
2. Every command block the README marks `<!-- readme-test: NAME -->` runs as written,
   from the clone's root with `bash -e`, with the built binary first on PATH (the README
   says `tracker` is `.build/release/tracker`). It runs alone: `scripts/cluster.sh`
   uses fixed ports and the shared broker, which it stops only if it started it.
"""
import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import ROOT, fail, log, tracker_binary  # noqa: E402

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading):
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    out, in_code = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and re.match(r"#{1,6} ", line):
            out.add(slug(line.lstrip("#")))
    return out


def check_links():
    pages = [os.path.join(ROOT, "README.md")] + glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
    broken, count = [], 0
    for page in pages:
        in_code = False
        for number, line in enumerate(open(page, encoding="utf-8"), 1):
            if line.startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue
                count += 1
                path, _, anchor = target.partition("#")
                resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                where = f"{os.path.relpath(page, ROOT)}:{number}: {target}"
                if not os.path.exists(resolved):
                    broken.append(f"{where} (no such file)")
                elif anchor and os.path.isfile(resolved) and resolved.endswith(".md") and anchor not in anchors(resolved):
                    broken.append(f"{where} (no heading #{anchor})")
    if broken:
        fail("links that do not resolve:\n  " + "\n  ".join(broken))
    log(f"{count} relative links in README.md and {len(pages) - 1} pages of docs/ resolve")


def run_blocks():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    blocks = re.findall(r"<!-- readme-test: ([\w-]+) -->\n```sh\n(.*?)```", text, re.S)
    if not blocks:
        fail("README.md marks no block for this test (<!-- readme-test: NAME -->)")
    env = dict(os.environ, PATH=f"{os.path.dirname(tracker_binary())}:{os.environ['PATH']}")
    for name, script in blocks:
        out = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            subprocess.run(["scripts/cluster.sh", "down"], cwd=ROOT, capture_output=True)
            fail(f"the README's {name} block failed (exit {out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        log(f"README block {name}: {len(script.strip().splitlines())} commands ran as written; last lines: "
            + " | ".join(out.stdout.strip().splitlines()[-2:]))


def main():
    check_links()
    run_blocks()
    print("README: links resolve and its marked blocks run")


if __name__ == "__main__":
    main()
