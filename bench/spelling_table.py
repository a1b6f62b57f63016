"""Equal spellings of the idiom corpus (test/e2e/spellings.py) through
staticify: how many end at their twin's sync points, and, grouped by the
spelling rule, those that do not, with what each keeps.

    /usr/bin/python3 bench/spelling_table.py [--bin build/bin] [--docs docs]

Prints the table; with --docs, writes it into docs/coverage.md between the
spellings markers."""
import argparse
import collections
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "e2e"))
import spellings  # noqa: E402
sys.path.insert(0, str(ROOT / "bench"))
from docs_section import write_section  # noqa: E402

BEGIN, END = "<!-- spellings:begin -->", "<!-- spellings:end -->"


def short(kept):
    """What a kept sync point says, to the point: for bound, the uses with
    no bounded form."""
    marker = "uses with no bounded form materialize: "
    if marker in kept:
        op = kept.split(":", 1)[0]
        return f"{op}: bound: no bounded form for {kept.split(marker, 1)[1].rstrip(')')}"
    return kept[:120]


def table(found, divergent):
    by_rule = collections.defaultdict(list)
    for v, twin, mine, kept in divergent:
        by_rule[v.rules].append((v.idiom, twin, mine, kept[0] if kept else ""))
    idioms = len({v.idiom for v in found})
    counted = (f"{len(found)} spellings of the {idioms} idioms (5 to "
               f"{max(collections.Counter(v.idiom for v in found).values())} each, "
               f"{len(spellings.RULES)} rules); **{len(found) - len(divergent)} end at their "
               f"twin's sync points**")
    if not divergent:
        return "\n".join([BEGIN, "", counted + ", every one (`test/e2e/test_spellings.py` "
                           "checks each).", "", END])
    lines = [BEGIN, "",
             counted + f", {len(divergent)} do not "
             f"(`test/e2e/test_spellings.py` expects exactly these):", "",
             "| spelling rule | idiom | twin (before → after) | spelling | what it keeps |",
             "|---|---|---|---|---|"]
    for rule in sorted(by_rule):
        for idiom, twin, mine, kept in by_rule[rule]:
            lines.append(f"| `{rule}` | `{idiom}` | {twin[0]} → {twin[1]} | "
                         f"{mine[0]} → {mine[1]} | {short(kept).replace('|', '/')} |")
    lines += ["", END]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--docs")
    args = parser.parse_args()
    found = spellings.all_variants()
    with tempfile.TemporaryDirectory() as directory:
        divergent = spellings.compare(found, str(pathlib.Path(args.bin) / "staticify"),
                                      directory, verbose=False)
    text = table(found, divergent)
    print(text)
    if args.docs:
        write_section(pathlib.Path(args.docs) / "coverage.md", BEGIN, END, text,
                      "## Equal spellings of the idioms")


if __name__ == "__main__":
    main()
