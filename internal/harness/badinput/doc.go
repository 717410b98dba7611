// Package badinput holds the bad-input corpus: one table of damaged files,
// hostile batches and contradictory remote objects, each row naming the
// damage and the outcome tierlog promises for it (a typed error, a repair,
// or records still readable up to an offset). The package has no API; its
// test, TestCorpus, is the table. It is test machinery (DESIGN.md section 2,
// layer 8) and imports only the public packages, so every row exercises what
// an embedding broker sees.
package badinput
