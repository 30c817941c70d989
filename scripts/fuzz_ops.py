"""Differential fuzzer: random tensor programs on Tensorscope (C and INTERP by default) against PyTorch.

The programs come from tests/python/fuzz_programs.py (its docstring says what is generated): shapes 0-d to 5-d
with size-0/size-1 dims, broadcasting, movement ops, reductions, matmul, indexing, elementwise ops, float32/int32/
bool/float16, and for float32 the gradients of every input. A program that disagrees with PyTorch (values, shape,
dtype, gradients) or makes Tensorscope raise where PyTorch does not is minimized (ops dropped, dims shrunk while
the failure keeps its kind) and printed as a pytest function for tests/python/test_fuzz_ops.py.

Run:
  PYTHONPATH=build/python /usr/bin/python3 scripts/fuzz_ops.py --seconds 600
  PYTHONPATH=build/python /usr/bin/python3 scripts/fuzz_ops.py --programs 200 --seed 1000 [--devices C,INTERP]
Exit status 1 when something was found.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))

import fuzz_programs as fp  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, help="run for this long (default: --programs)")
    ap.add_argument("--programs", type=int, default=100, help="number of programs when --seconds is not given")
    ap.add_argument("--seed", type=int, default=0, help="seed of the first program (then seed+1, ...)")
    ap.add_argument("--devices", default="C,INTERP")
    ap.add_argument("--max-ops", type=int, default=6)
    ap.add_argument("--quiet", action="store_true", help="print findings only")
    args = ap.parse_args()
    devices = [d for d in args.devices.split(",") if d]
    start = time.time()
    seed, n, found = args.seed, 0, {}
    while (time.time() - start < args.seconds) if args.seconds else (n < args.programs):
        program = fp.generate(seed, max_ops=args.max_ops)
        kind = fp.failure_kind(program, devices)
        n += 1
        if kind and kind != "invalid":
            small = fp.minimize(program, devices, kind)
            msg = fp.failure_message(small, devices)
            key = (kind, tuple(op[0].split("(")[0] for op in small["ops"]))
            first = key not in found
            found.setdefault(key, []).append(seed)
            print(f"\n# seed {seed}: {kind}" + ("" if first else " (same signature as seed %d)" % found[key][0]))
            if first:
                print(f"# {' '.join(msg.split())[:300]}")
                print(fp.reproducer(small, f"fuzz_seed_{seed}", msg))
            sys.stdout.flush()
        elif not args.quiet and n % 25 == 0:
            print(f"{n} programs, {time.time() - start:.0f} s, {len(found)} distinct failures", flush=True)
        seed += 1
    print(f"\n{n} programs (seeds {args.seed}..{seed - 1}) on {','.join(devices)} in {time.time() - start:.0f} s: "
          f"{sum(len(v) for v in found.values())} failing, {len(found)} distinct")
    for (kind, ops), seeds in found.items():
        print(f"  {kind}: {' -> '.join(ops)}  seeds {seeds[:10]}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
