"""An evaluation loop that keeps every output (as with grad on, each keeps its graph), against the stand-in
driver, through a library in a site-packages folder (tests/py/site-packages/tinynn). The user's lines
(evaluate, restore) must lead the report, before the library's Linear.forward."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
import tinynn  # noqa: E402

MiB = 1 << 20


def build(width):
    return [tinynn.Linear(width) for _ in range(2)]


def evaluate(model, steps):
    outputs = []
    for _ in range(steps):
        h = 8
        for layer in model:
            outputs.append(layer(h))  # LINE:evaluate
    return outputs


def restore():
    return tinynn.load(512 * MiB)  # LINE:restore


def main():
    assert tinynn.cuda.cuInit(0) == 0
    model = build(1024)  # 2 x 4 MiB of weights
    kept = evaluate(model, 24)  # 48 x 32 KiB
    try:
        restore()
    except tinynn.OutOfMemoryError as e:
        print("caught:", e)
        return 1
    return 0 if kept else 2


if __name__ == "__main__":
    sys.exit(main())
