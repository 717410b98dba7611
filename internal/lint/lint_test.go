package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestModuleLayout applies the rules to every package of the module.
func TestModuleLayout(t *testing.T) {
	pkgs := listModule(t)
	require.NotEmpty(t, pkgs)
	for _, msg := range Check(pkgs) {
		t.Error(msg)
	}
}

func listModule(t *testing.T) []Package {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to list the module: %v", err)
	}
	// The test runs in internal/lint; ../.. is the module root.
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())

	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestCheckCatchesViolations shows each rule firing on a made-up module,
// so TestModuleLayout passing means something.
func TestCheckCatchesViolations(t *testing.T) {
	m := func(rel string) string { return Module + "/" + rel }
	cases := []struct {
		name string
		pkg  Package
		want int
	}{
		{"log may use record, epochcache, truncation, zap",
			Package{m("log"), []string{m("log/record"), m("epochcache"), m("truncation"), zap, "os"}}, 0},
		{"log must not import remote",
			Package{m("log"), []string{m("remote")}}, 1},
		{"record must not import epochcache (same layer)",
			Package{m("log/record"), []string{m("epochcache")}}, 1},
		{"base is stdlib only",
			Package{m("internal/base"), []string{"github.com/pkg/errors"}}, 1},
		{"objstore is stdlib only",
			Package{m("remote/objstore"), []string{m("internal/base")}}, 1},
		{"minio only in s3",
			Package{m("remote"), []string{minio}}, 1},
		{"client_golang only in promexport",
			Package{m("tierstate"), []string{promLib + "/prometheus"}}, 1},
		{"promexport may import client_golang",
			Package{m("promexport"), []string{promLib + "/prometheus", m("tierstate"), m("log")}}, 0},
		{"pgx only in pgcp",
			Package{m("wal"), []string{pgx}}, 1},
		{"pgcp may import pgx",
			Package{m("wal/pgcp"), []string{pgx + "/pgxpool", pgx, zap, m("wal")}}, 0},
		{"s3 may import minio",
			Package{m("remote/objstore/s3"), []string{minio, minio + "/pkg/credentials", m("remote/objstore")}}, 0},
		{"epochcache may not use pebble's database",
			Package{m("epochcache"), []string{pebble}}, 1},
		{"nothing imports examples",
			Package{m("tierstate"), []string{m("examples/rebuild")}}, 1},
		{"library code may not import test machinery",
			Package{m("remote"), []string{m("internal/harness/testutils")}}, 1},
		{"examples may import everything",
			Package{m("examples/rebuild"), []string{m("tierstate"), m("internal/harness/testutils"), m("log")}}, 0},
		{"commands may import the library",
			Package{m("cmd/tierlog"), []string{m("log"), m("remote"), m("wal/pebblecp"), m("tierstate")}}, 0},
		{"nothing imports a command",
			Package{m("tierstate"), []string{m("cmd/tierlog")}}, 1},
		{"log may use its internal segment package",
			Package{m("log"), []string{m("log/internal/segment")}}, 0},
		{"the segment package may not import log",
			Package{m("log/internal/segment"), []string{m("log")}}, 1},
		{"the segment package may use record and epochcache",
			Package{m("log/internal/segment"), []string{m("log/record"), m("epochcache"), m("truncation"), pebbleVFS}}, 0},
		{"wal may use record, objstore, base, epochcache",
			Package{m("wal"), []string{m("log/record"), m("remote/objstore"), m("internal/base"), m("epochcache"), pebbleVFS}}, 0},
		{"wal may not use pebble's database (the embedded plane does)",
			Package{m("wal"), []string{pebble}}, 1},
		{"the Pebble control plane may use pebble and wal",
			Package{m("wal/pebblecp"), []string{m("wal"), pebble, pebbleVFS, zap}}, 0},
		{"wal may not import its control planes",
			Package{m("wal"), []string{m("wal/pebblecp")}}, 1},
		{"the conformance suite may not import test machinery",
			Package{m("wal/controlplanetest"), []string{m("internal/harness/testseed")}}, 1},
		{"unknown directories are refused",
			Package{m("util"), nil}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Check([]Package{c.pkg})
			require.Len(t, got, c.want, "problems: %q", got)
		})
	}
}
