"""Load a headroom trace (docs/trace.md, schema v1) into pandas DataFrames.

    import sys; sys.path.insert(0, "data_tools")
    import headroom_trace as ht
    t = ht.load("results/quickstart/trace.rank0.h5")
    t.steps          # one row per optimizer step
    t.events         # one row per allocator event; action/category/phase by name, tag as text
    t.tags           # tag_id -> tag
    t.phase_peaks    # one row per (step, phase)
    t.oom            # None, or a dict of /oom's attributes plus top_blocks / live_by_category
    ht.peak_by_category_per_step(t.events)   # step x category: the highest live bytes
    ht.step_timeline(t.events, 3)            # step 3's events with allocated / reserved after each

Needs h5py and pandas (Debian: python3-h5py, python3-pandas). Only reads; a
trace of a live run is read as of its last flush.
"""

from dataclasses import dataclass
from typing import Optional

import h5py
import numpy as np
import pandas as pd

SCHEMA_VERSION = 1
CATEGORIES = ["param", "grad", "optim", "activation", "checkpoint", "logits", "attention",
              "comm", "workspace"]
PHASES = ["init", "forward", "backward", "loss", "optimizer", "gather", "reduce"]


@dataclass
class Trace:
    path: str
    attrs: dict
    steps: pd.DataFrame
    events: pd.DataFrame
    tags: pd.Series
    phase_peaks: pd.DataFrame
    oom: Optional[dict]


def _enum_names(dataset, frame, fields):
    """Integer enum columns -> pandas categoricals of their HDF5 names."""
    for field in fields:
        mapping = h5py.check_enum_dtype(dataset.dtype[field])
        names = {value: name for name, value in mapping.items()}
        order = [names[v] for v in sorted(names)]
        frame[field] = pd.Categorical(frame[field].map(names), categories=order)
    return frame


def _readable_tags(table):
    """The tags, or after a kill inside a flush the longest readable prefix:
    the torn flush's newest strings may point past the file's end (as
    headroom's own reader, docs/trace.md "What survives a crash")."""
    try:
        return table.asstr()[:]
    except OSError:
        good, bad = 0, len(table)
        while bad - good > 1:
            mid = (good + bad) // 2
            try:
                table.asstr()[:mid]
                good = mid
            except OSError:
                bad = mid
        return table.asstr()[:good] if good else []


def _open(path):
    """The trace read-only, in SWMR read mode where HDF5 allows it.

    swmr=True only lets HDF5 read past the superblock's recorded end of
    allocation: a run killed inside a flush can leave chunks there that the
    table's index already points at (docs/trace.md "What survives a crash").
    HDF5 refuses it for a file this process already has open without SWMR
    (an h5py.File of your own): then the open is plain, through that handle."""
    try:
        return h5py.File(path, "r", swmr=True)
    except OSError as e:
        if "SWMR read access flag" not in str(e):
            raise
        return h5py.File(path, "r")


def load(path, events=True):
    """Reads the whole trace; events=False skips /memory/events (50 MB per million rows)."""
    with _open(path) as f:
        attrs = {k: (v.item() if hasattr(v, "item") else v) for k, v in f.attrs.items()}
        version = int(attrs.get("schema_version", 0))
        if version > SCHEMA_VERSION:
            raise ValueError(f"{path}: trace schema version {version} is newer than this "
                             f"module reads ({SCHEMA_VERSION})")
        steps = pd.DataFrame(f["steps"][:])
        if "skipped" in steps:
            steps["skipped"] = steps["skipped"].astype(bool)
        tags = pd.Series(_readable_tags(f["memory/tags"]), dtype=object, name="tag")
        ev = f["memory/events"]
        frame = pd.DataFrame(ev[:] if events else ev[:0])
        frame = _enum_names(ev, frame, ("action", "category", "phase"))
        frame["tag"] = tags.to_numpy()[frame["tag_id"].to_numpy()] if len(tags) else ""
        pp = f["memory/phase_peaks"]
        peaks = _enum_names(pp, pd.DataFrame(pp[:]), ("phase",))
        oom = None
        if "oom" in f:
            g = f["oom"]
            oom = {k: (v.item() if hasattr(v, "item") else v) for k, v in g.attrs.items()}
            top = pd.DataFrame(g["top_blocks"][:])
            if len(top):
                top["tag"] = top["tag"].map(lambda b: b.decode() if isinstance(b, bytes) else b)
            oom["top_blocks"] = _enum_names(g["top_blocks"], top, ("category", "phase"))
            oom["live_by_category"] = _enum_names(
                g["live_by_category"], pd.DataFrame(g["live_by_category"][:]), ("category",))
            # Any other table the writer adds under /oom (e.g. advice) comes as a DataFrame.
            for name, item in g.items():
                if name not in oom and isinstance(item, h5py.Dataset):
                    oom[name] = pd.DataFrame(item[:]) if item.dtype.names else item[()]
    return Trace(path, attrs, steps, frame, tags, peaks, oom)


def replay(events):
    """Adds allocated, reserved and live_<category> (bytes after each event), replaying in seq order."""
    out = events.copy()
    b = out["bytes"].astype(np.int64)
    action = out["action"].astype(str)
    alloc = np.where(action == "alloc", b, np.where(action == "free", -b, 0))
    segment = np.where(action == "segment_alloc", b, np.where(action == "segment_free", -b, 0))
    out["allocated"] = np.cumsum(alloc)
    out["reserved"] = np.cumsum(segment)
    category = out["category"].astype(str).to_numpy()
    for c in CATEGORIES:
        out["live_" + c] = np.cumsum(np.where(category == c, alloc, 0))
    return out


def peak_by_category_per_step(events):
    """step x category: the highest live bytes of each category during each step (step -1 = init)."""
    live = replay(events)
    cols = ["live_" + c for c in CATEGORIES]
    table = live.groupby("step")[cols].max()
    table.columns = CATEGORIES
    return table.loc[:, (table != 0).any()]


def step_timeline(events, step):
    """The events of one step, each with allocated / reserved / live_<category> after it."""
    live = replay(events)
    return live[live["step"] == step].reset_index(drop=True)
