"""``cudastack fleet``: the same doctor, snapshot and diff on every node of a cluster.

Data flows one way: a backend (:mod:`.ray`, :mod:`.slurm`) runs :func:`.node.inspect_node` on each
node and hands back one :class:`.report.NodeResult` per node (or ``unreachable``); :mod:`.report`
groups the nodes into classes of identical fingerprint and diffs each class against a reference
with :func:`cudastack.snapshot.diff_snapshots`. Ray is imported only by :mod:`.ray`.
"""
