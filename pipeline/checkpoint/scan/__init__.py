"""inspect's fast path: a checkpoint's coverage from its headers proven byte for byte, in parallel, behind one function.

`scan_coverage(manifest, checkpoint)` answers what the plain reader's `check_coverage` (dayone.checkpoint.coverage)
answers, on any checkpoint (tests/checkpoint/test_scan_agrees.py checks every layout the tests build), and is fast
on the layout releases have: each shard written by the safetensors library (transformers' save_pretrained), the
index with its keys sorted. It takes a shortcut only where it proves it, and otherwise leaves the verdict to the
plain reader:

- Per shard, in forked workers (`workers`): the header's text is compared whole with what the library writes for
  the run of the manifest the shard holds (`proof`, `text`, `runs`); no JSON is parsed per entry. A header that is
  not proven is read and compared name by name by the plain reader.
- Across shards: the index is read once, alongside the workers (`index`), and every shard's names must be exactly
  those it lists for the shard's file, no name listed twice, no other file listed. Then no tensor is held twice or
  elsewhere than the index says, and the index's per-file counts are the headers' (it is not counted again).
  An index naming other files than its naming implies is counted, and those files scanned. Anything else (an index
  that is not plain pairs, a shard it does not list as held) goes to the plain reader, which names what differs.
"""

from __future__ import annotations

from dayone.checkpoint.coverage import Coverage, ShardComparison, assemble, reference_coverage
from dayone.checkpoint.reader import Checkpoint
from dayone.checkpoint.scan.index import Listing, read_listing
from dayone.checkpoint.scan.proof import Expected
from dayone.checkpoint.scan.runs import ManifestRuns
from dayone.checkpoint.scan.workers import Forked, scan_shards
from dayone.spec.manifest import EntryTable, Manifest

__all__ = ["scan_coverage"]


def scan_coverage(manifest: Manifest, checkpoint: Checkpoint) -> tuple[Coverage, list[ShardComparison]]:
    """The checkpoint's coverage of `manifest` and each shard's comparison (counts, bytes per dtype), as
    dayone.checkpoint.coverage.reference_coverage gives them; an InputError naming what is wrong."""
    if checkpoint.pickle_files:
        return reference_coverage(manifest, checkpoint)
    expected = Expected(EntryTable(manifest), ManifestRuns(manifest))
    # The files the index's naming implies, unverified: the index check below proves it lists exactly these.
    jobs = [(checkpoint.root / file, file) for file in checkpoint.shard_files]
    index_path = checkpoint.index_path
    listing = Forked(read_listing, index_path) if index_path is not None else None
    try:
        results = scan_shards(jobs, expected)
        for result in results:
            if isinstance(result, Exception):
                raise result
        listed = listing.result() if listing is not None else None
    finally:
        if listing is not None:
            listing.close()
    if index_path is None:
        return assemble(results, expected.table, checkpoint), results  # one shard: its names are distinct JSON keys
    if listed is not None and lists_exactly(results, listed):
        checkpoint.index_proven({r.file: r.tensors for r in results})
        return assemble(results, expected.table, checkpoint), results
    if checkpoint.files != [file for _, file in jobs]:  # counted: the index names other files than its naming implied
        return scan_coverage(manifest, checkpoint)  # scan those (`files` is now the index's own: no second round)
    return reference_coverage(manifest, checkpoint)


def lists_exactly(results: list[ShardComparison], listed: Listing) -> bool:
    """Whether the index lists exactly the scanned files, each with exactly its shard's names, no name twice: then
    no tensor is in two shards, and each is where the index says."""
    return (
        listed.keys_distinct
        and listed.texts.keys() == {r.file for r in results}
        and all(r.names_text is not None and listed.texts[r.file] == r.names_text for r in results)
    )
