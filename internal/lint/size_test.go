package lint

import (
	"os"
	"path/filepath"
	"testing"
)

// readmeMaxBytes bounds README.md: what tierlog is, the commands, a short
// API tour, the status, the reliability summary and links. What is longer
// goes into a page of docs/.
const readmeMaxBytes = 20_000

// designMaxBytes bounds DESIGN.md, the map of the code: what exists and
// why, the layers, the formats, the error model, the commit points and the
// lock order. Each topic's details go to a page of docs/, each package's
// to its doc comment, history to CHANGELOG.md.
const designMaxBytes = 60_000

// performanceMaxBytes bounds docs/performance.md: the method, the latest
// run's headline table, the unmet goals with their measured causes and how
// to rerun. Older runs stay in git history.
const performanceMaxBytes = 30_000

func checkSize(t *testing.T, name string, limit int64) {
	t.Helper()
	fi, err := os.Stat(filepath.Join(repoRoot(t), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d bytes (limit %d)", name, fi.Size(), limit)
	if fi.Size() > limit {
		t.Errorf("%s is %d bytes, over its limit of %d bytes: move what is long into docs/", name, fi.Size(), limit)
	}
}

func TestReadmeSize(t *testing.T) { checkSize(t, "README.md", readmeMaxBytes) }

func TestDesignSize(t *testing.T) { checkSize(t, "DESIGN.md", designMaxBytes) }

func TestPerformanceSize(t *testing.T) {
	checkSize(t, filepath.Join("docs", "performance.md"), performanceMaxBytes)
}
