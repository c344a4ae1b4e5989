"""A reference with a forward and nothing else: enough for values, not for forward mode."""


def forward(x, **_):
    return x * 2.0
