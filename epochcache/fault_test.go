package epochcache

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"
)

// TestWriteFaults injects an error at each write operation of a checkpoint
// write in turn (errorfs: (ErrInjected (And Writes (OnIndex n)))), for an
// Assign and for a Flush after a truncation. The error must reach the
// caller, the in-memory change must stay with the cache dirty, a reopen
// without faults must show the old or the new list, and a retried Flush
// must persist the new one.
func TestWriteFaults(t *testing.T) {
	before := []Entry{{1, 0}, {2, 5}, {3, 9}}
	ops := []struct {
		name  string
		after []Entry
		run   func(c *Cache) error
	}{
		{"assign 4@12", []Entry{{1, 0}, {2, 5}, {3, 9}, {4, 12}}, func(c *Cache) error {
			_, err := c.Assign(4, 12)
			return err
		}},
		{"truncate-from-end 6 + flush", []Entry{{1, 0}, {2, 5}}, func(c *Cache) error {
			c.TruncateFromEnd(6)
			return c.Flush()
		}},
		{"truncate-from-start 3 + flush", []Entry{{1, 3}, {2, 5}, {3, 9}}, func(c *Cache) error {
			c.TruncateFromStart(3)
			return c.Flush()
		}},
		{"assign-all 5@20", []Entry{{1, 0}, {2, 5}, {3, 9}, {5, 20}}, func(c *Cache) error {
			return c.AssignAll([]Entry{{5, 20}})
		}},
		{"clear-and-flush", nil, func(c *Cache) error { return c.ClearAndFlush() }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			failures := 0
			for n := 0; ; n++ {
				mem := vfs.NewMem()
				require.NoError(t, mem.MkdirAll(testDir, 0o755))
				var inj switchableInjector
				c, err := Open(errorfs.Wrap(mem, &inj), testPath)
				require.NoError(t, err)
				require.NoError(t, c.AssignAll(before))

				dsl := fmt.Sprintf("(ErrInjected (And Writes (OnIndex %d)))", n)
				inj.inner, err = errorfs.ParseDSL(dsl)
				require.NoError(t, err)
				err = op.run(c)
				inj.inner = nil
				if err == nil {
					// n is past the last write operation: done.
					require.Equal(t, op.after, nilIfEmpty(c.Entries()))
					break
				}
				failures++
				var injected errorfs.LabelledError
				require.Truef(t, errors.As(err, &injected), "%s: error %v is not the injected one", dsl, err)
				require.Equal(t, op.after, nilIfEmpty(c.Entries()), "%s: in-memory change lost", dsl)
				require.True(t, c.Dirty(), "%s: cache not dirty after a failed write", dsl)

				reopened, err := Open(mem, testPath)
				require.NoError(t, err, dsl)
				got := reopened.Entries()
				require.Truef(t, slices.Equal(got, before) || slices.Equal(got, op.after),
					"%s: reopened %s, want %s or %s", dsl, FormatEntries(got),
					FormatEntries(before), FormatEntries(op.after))

				require.NoError(t, c.Flush(), "%s: retry", dsl)
				require.False(t, c.Dirty())
				reopened, err = Open(mem, testPath)
				require.NoError(t, err)
				require.Equal(t, op.after, nilIfEmpty(reopened.Entries()), dsl)
			}
			// create, write, sync, rename, directory sync.
			require.GreaterOrEqual(t, failures, 5)
		})
	}
}

func nilIfEmpty(entries []Entry) []Entry {
	if len(entries) == 0 {
		return nil
	}
	return entries
}

// TestReadFaults: an I/O error while reading the checkpoint stays an I/O
// error (not ErrCorruption), wrapped with the path.
func TestReadFaults(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll(testDir, 0o755))
	c, err := Open(mem, testPath)
	require.NoError(t, err)
	_, err = c.Assign(1, 0)
	require.NoError(t, err)
	for _, dsl := range []string{
		`(ErrInjected (And Reads (PathMatch "data/leader-epoch-checkpoint")))`,
		`(ErrInjected (And (PathMatch "data/*.tmp") (OnIndex 0)))`, // the leftover removal
	} {
		inj, err := errorfs.ParseDSL(dsl)
		require.NoError(t, err)
		// A leftover temp file, so that Open has one to remove.
		f, err := mem.Create(testPath+tmpSuffix, vfs.WriteCategoryUnspecified)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		_, err = Open(errorfs.Wrap(mem, inj), testPath)
		require.Error(t, err, dsl)
		require.False(t, errors.Is(err, ErrCorruption), dsl)
		require.True(t, errors.As(err, new(errorfs.LabelledError)), dsl)
		require.Contains(t, err.Error(), testPath, dsl)
	}
}
