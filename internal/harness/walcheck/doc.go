// Package walcheck is test machinery (DESIGN.md section 2, layer 8) for
// the WAL read path: it generates random WAL objects, commits them into a
// control plane (ModelPlane, or a real one), damages the store (bit flips,
// truncation, objects or runs swapped, an object replaced by another valid
// one, deleted) and makes FindBatches lie (Liar: gaps, overlaps, another
// partition's or object's batch, past-the-end ranges), and checks what a
// reader served against what was committed (CheckFetch): records byte-
// identical to the committed batches and a prefix of them, intact batches
// served whatever their neighbours' damage, typed errors, no panic.
// wal's TestReaderRandomDamage and consolidate's TestFetcherRandomDamage
// drive it.
package walcheck
