"""Plots a person would rather look at than read: facts per day by category, memory size per
user over time. Pure: DayCounts in, plotly figures out."""

from __future__ import annotations

import collections
from collections.abc import Sequence

import plotly.graph_objects as go

from .data import DayCounts

__all__ = ["facts_per_day", "memory_over_time", "TOP_CATEGORIES"]

# Beyond this many categories the rest are drawn as one "other" stack, or no colour means anything.
TOP_CATEGORIES = 8


def _layout(fig: go.Figure, title: str, y: str) -> go.Figure:
    # Days as categories: a date axis would draw hours between two days of logs.
    fig.update_xaxes(type="category", categoryorder="category ascending")
    fig.update_layout(
        title=title,
        yaxis_title=y,
        height=320,
        margin=dict(l=50, r=20, t=40, b=40),
        legend=dict(orientation="h", y=-0.2),
        template="plotly_white",
    )
    return fig


def facts_per_day(days: Sequence[DayCounts], user: str | None = None) -> go.Figure:
    """Stacked bars: facts per day, by category (one user's, or everyone's)."""
    per_day: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    totals: collections.Counter = collections.Counter()
    for day in days:
        if user is None or day.user == user:
            per_day[day.date].update(day.categories)
            totals.update(day.categories)
    top = [c for c, _ in totals.most_common(TOP_CATEGORIES)]
    dates = sorted(per_day)
    fig = go.Figure()
    for category in top:
        fig.add_bar(name=category, x=dates, y=[per_day[d][category] for d in dates])
    rest = [sum(n for c, n in per_day[d].items() if c not in top) for d in dates]
    if any(rest):
        fig.add_bar(name="other", x=dates, y=rest)
    fig.update_layout(barmode="stack")
    return _layout(fig, f"Facts per day by category — {user or 'all users'}", "facts")


def memory_over_time(days: Sequence[DayCounts]) -> go.Figure:
    """Lines: each user's facts so far, day by day (how their memory grows)."""
    per_user: dict[str, dict[str, int]] = collections.defaultdict(dict)
    for day in days:
        per_user[day.user][day.date] = per_user[day.user].get(day.date, 0) + sum(day.categories.values())
    fig = go.Figure()
    for user in sorted(per_user):
        dates = sorted(per_user[user])
        running, ys = 0, []
        for d in dates:
            running += per_user[user][d]
            ys.append(running)
        fig.add_scatter(name=user, x=dates, y=ys, mode="lines+markers")
    return _layout(fig, "Memory size per user over time", "facts so far")
