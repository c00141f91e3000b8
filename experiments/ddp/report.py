"""The ddp experiment's first picture at the top of the report (its spec's ``glance`` hook): for the model
with the largest gradient, each synchronised step split into compute (the same step without
communication), the communication the step waits for and the gradient all_reduce it hides under compute,
beside the gradient bytes it all-reduces per step against plain DDP's. Reads stored records only."""

from __future__ import annotations

from suite.api import Picture, figures, fmt_bytes


def glance(run: dict, recs: list[dict]) -> Picture | None:
    """The stacked bars of the model with the largest gradient; None without a step that communicates."""
    steps = [r for r in recs if r.get("comm_exposed_ms") is not None and r["size_bytes"] and r.get("model")]
    if not steps:
        return None
    model = max(steps, key=lambda r: r.get("grad_bytes") or 0)["model"]
    steps = [r for r in steps if r["model"] == model]
    alone = next((r for r in recs if r.get("model") == model and r["op"] == "all_reduce"), None)
    ddp = next((r for r in steps if r.get("label") == "ddp"), steps[0])
    exposed = [max(r["comm_exposed_ms"], 0.0) for r in steps]
    hidden = [
        None if alone is None else max(alone["time_us"] / 1e3 * (r.get("allreduces_per_step") or 1) - e, 0.0)
        for r, e in zip(steps, exposed)
    ]
    title = f"ddp: where the step's time goes ({model}, {ddp['backend']}, {ddp['device']}, {ddp['world_size']} ranks)"
    png = figures.stacked_bar_plot(
        title,
        [str(r.get("label") or r["op"]) for r in steps],
        [
            ("compute: the same step without communication (x micro-batches)", _compute(steps), ""),
            ("exposed communication: max(step - compute, 0)", exposed, ""),
            ("hidden communication: max(all_reduce alone - exposed, 0)", hidden, "//"),
        ],
        xlabel="time of one optimizer step (ms, median, slowest rank)",
        marks=("step", [r["time_us"] / 1e3 for r in steps]),
        beside=(
            "float32 gradient bytes\nall-reduced per step / DDP's",
            [r["size_bytes"] / ddp["size_bytes"] for r in steps],
        ),
    )
    caption = (
        f"ddp: each way of synchronising the {model} model's step ({fmt_bytes(ddp.get('grad_bytes'))} gradient) "
        "split into compute, the communication the step waits for (exposed) and the gradient all_reduce hidden "
        "under backward; beside it, the bytes it all-reduces per step against plain DDP's. "
        "A long exposed bar is communication DDP did not hide."
    )
    return Picture(title=title, png=png, caption=caption)


def _compute(steps: list[dict]) -> list[float]:
    return [r["local_step_ms"] * (r.get("micro_batches") or 1) for r in steps]
