"""How the models write a time for people: µs, ms or s, three significant digits."""


def fmt_time(us: float) -> str:
    return f"{us / 1e6:.3g} s" if us >= 1e6 else f"{us / 1e3:.3g} ms" if us >= 1e3 else f"{us:.3g} µs"
