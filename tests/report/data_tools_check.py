# Run by run_report_test.cc (RunReport.DataToolsPython) on the trace it wrote:
# data_tools/headroom_trace.py must give the figures the stream was built with.
import sys

sys.path.insert(0, sys.argv[1])
import headroom_trace as ht

MiB = 2**20
t = ht.load(sys.argv[2])
assert t.attrs["schema_version"] == 1
assert len(t.steps) == 2 and t.steps["skipped"].tolist() == [False, True], t.steps
assert len(t.events) == 24010, len(t.events)
assert t.events["tag"][5] == "loss.chunk.0.logits", t.events["tag"][5]
assert str(t.events["category"][5]) == "logits"
assert set(t.phase_peaks["phase"].astype(str)) == {"forward", "loss"}

peaks = ht.peak_by_category_per_step(t.events)
assert peaks.loc[-1, "param"] == 8 * MiB
assert peaks.loc[0, "activation"] == 5 * MiB, peaks
assert peaks.loc[0, "logits"] == 30 * MiB
assert peaks.loc[1, "activation"] == 8 * MiB
assert peaks.loc[1, "logits"] == 0
assert "comm" not in peaks.columns

step0 = ht.step_timeline(t.events, 0)
assert len(step0) == 6, len(step0)
assert step0["allocated"].max() == 40 * MiB
assert step0.loc[step0["allocated"].idxmax(), "seq"] == 5
assert (step0["reserved"] == 64 * MiB).all()
assert t.oom is None
print("ok")
