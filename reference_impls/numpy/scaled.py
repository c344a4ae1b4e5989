"""scaled(k, x) = k * x with a custom VJP k * g; k is non-differentiable, no cotangent (002)."""


def forward(k, x, **_):
    return k * x


def vjp(g, k, x, **_):
    return {"x": k * g}
