package badinput

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// area names the kind of input a row damages. docs/reliability.md's tests table
// counts rows per area.
type area string

const (
	areaSegment    area = "segment file"
	areaIndex      area = "index file"
	areaCheckpoint area = "checkpoint"
	areaSnapshot   area = "producer snapshot"
	areaClient     area = "client batch"
	areaFollower   area = "follower batch"
	areaRemote     area = "remote object"
	areaManifest   area = "remote manifest"
	areaDirName    area = "partition directory"
)

// outcome is what a row promises. Exactly the fields that matter are set:
//   - err: the operation fails with an error for which errors.Is(err, err)
//     holds; nil means it must succeed.
//   - repaired: the damage was repaired (cut, rebuilt or moved aside) and
//     reported, and the log accepts writes again.
//   - readableTo: records [start, readableTo) read back intact after the
//     damage; -1 when the row has no log to read.
type outcome struct {
	err        error
	repaired   bool
	readableTo int64
}

func (o outcome) String() string {
	var parts []string
	if o.err != nil {
		parts = append(parts, "error "+o.err.Error())
	} else {
		parts = append(parts, "no error")
	}
	if o.repaired {
		parts = append(parts, "repaired")
	}
	if o.readableTo >= 0 {
		parts = append(parts, fmt.Sprintf("readable to %d", o.readableTo))
	}
	return strings.Join(parts, ", ")
}

// row is one case of the corpus. run applies the damage, performs the
// operation, and reports what it observed; the table compares that with
// want, so a row cannot pass by asserting nothing.
type row struct {
	area   area
	damage string
	want   outcome
	run    func(t *testing.T) outcome
}

// rowSets lists the files' contributions. Each group of rows lives in its
// own file (rows_*.go) and appends a function here in an init, so the table
// is one list while its parts can be read (and changed) apart.
var rowSets []func() []row

func allRows() []row {
	var rows []row
	for _, f := range rowSets {
		rows = append(rows, f()...)
	}
	return rows
}

// TestCorpus runs every row. A row's observed error must match the
// promised one by errors.Is (never by its text), and a row that promises no
// error must see none.
func TestCorpus(t *testing.T) {
	rows := allRows()
	seen := make(map[string]bool, len(rows))
	for _, r := range rows {
		name := string(r.area) + "/" + r.damage
		if seen[name] {
			t.Fatalf("two rows named %q", name)
		}
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			got := r.run(t)
			switch {
			case r.want.err == nil && got.err != nil:
				t.Fatalf("want %v; got error %v", r.want, got.err)
			case r.want.err != nil && !errors.Is(got.err, r.want.err):
				t.Fatalf("want %v; got error %v", r.want, got.err)
			}
			if got.repaired != r.want.repaired {
				t.Errorf("want %v; got repaired=%v", r.want, got.repaired)
			}
			if r.want.readableTo != got.readableTo {
				t.Errorf("want %v; got readable to %d", r.want, got.readableTo)
			}
		})
	}
	t.Logf("%d rows", len(rows))
}

// TestCorpusSize keeps the corpus from shrinking unnoticed.
func TestCorpusSize(t *testing.T) {
	const minRows = 60
	if n := len(allRows()); n < minRows {
		t.Errorf("corpus has %d rows; it promises at least %d", n, minRows)
	}
}
