"""A check that random draws are uniform: a chi-squared statistic over
counts of equally likely outcomes, as a z-score (for many degrees of
freedom chi2 is about normal with mean df and variance 2 df). The tests
that staticify random draws (randint below a bound, randperm prefixes)
compare the rewritten program's draws with it."""
import math

# |z| past this is one run in about 16,000 for a uniform draw.
Z_LIMIT = 4.0


def chi2_z(counts):
    """The z-score of the chi-squared statistic of \\p counts (a tensor of
    how often each equally likely outcome came up)."""
    expected = counts.sum() / counts.numel()
    chi2 = float(((counts - expected) ** 2).sum() / expected)
    df = counts.numel() - 1
    return (chi2 - df) / math.sqrt(2 * df)
