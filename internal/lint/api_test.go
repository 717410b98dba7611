package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoInternalTypesInPublicAPI applies CheckAPI to every importable,
// non-internal package of the module, typed from the export data the go
// command compiles (go list -export: the build cache makes it cheap, and
// no source is type-checked here).
func TestNoInternalTypesInPublicAPI(t *testing.T) {
	pkgs := loadPublicAPI(t)
	require.NotEmpty(t, pkgs)
	for _, msg := range CheckAPI(pkgs) {
		t.Error(msg)
	}
}

// exportPackage is what go list -export -deps reports of one package.
type exportPackage struct {
	ImportPath string
	Name       string
	Export     string
	Module     *struct{ Path string }
}

func loadPublicAPI(t *testing.T) []*types.Package {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to list the module: %v", err)
	}
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Name,Export,Module", "./...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())

	exports := map[string]string{}
	var public []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p exportPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Path == Module && p.Name != "main" && !IsInternal(p.ImportPath) {
			public = append(public, p.ImportPath)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	var pkgs []*types.Package
	for _, path := range public {
		p, err := imp.Import(path)
		require.NoError(t, err, "import %s", path)
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestCheckAPICatchesViolations shows each kind of mention firing on a
// made-up package, so TestNoInternalTypesInPublicAPI passing means
// something.
func TestCheckAPICatchesViolations(t *testing.T) {
	const internalSrc = `package secret
type T struct{ N int; U U }
type U struct{}
type V int
type W int
func (T) M() U { return U{} }
`
	cases := []struct {
		name, src string
		want      []string // the identifiers reported
	}{
		{"an exported func's result", `func F() []secret.T { return nil }`, []string{"F"}},
		{"an exported func's parameter", `func F(m map[string]*secret.T) {}`, []string{"F"}},
		{"an exported method of an exported type", `type S struct{}
func (S) M(chan secret.V) {}`, []string{"S.M"}},
		{"a method promoted from an unexported embedded type", `type inner struct{}
func (inner) M() secret.V { return 0 }
type S struct{ inner }`, []string{"S.M"}},
		{"an exported struct field", `type S struct{ F func() secret.V }`, []string{"S.F"}},
		{"an exported var", `var X secret.V`, []string{"X"}},
		{"an exported const", `const C = secret.W(1)`, []string{"C"}},
		{"an interface method", `type I interface{ M() [2]secret.V }`, []string{"I.M"}},
		{"an anonymous struct", `func F() struct{ X secret.V } { return struct{ X secret.V }{} }`, []string{"F.X"}},
		{"an unexported alias does not name it", `type v = secret.V
func F() v { return 0 }`, []string{"F"}},
		{"an exported alias names it", `type V = secret.V
func F() V { return 0 }`, nil},
		{"an aliased type's fields and methods are API", `type T = secret.T
func F() T { return T{} }`, []string{"T.M", "T.U"}},
		{"unexported identifiers are not API", `func f() secret.V { return 0 }
type s struct{ X secret.V }
func (s) M() secret.V { return 0 }
type S struct{ x secret.V }
func (S) m() secret.V { return 0 }`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fset := token.NewFileSet()
			conf := types.Config{Importer: importerFunc(func(path string) (*types.Package, error) {
				return typeCheck(fset, "example.com/m/internal/secret", internalSrc, nil)
			})}
			pkg, err := typeCheck(fset, "example.com/m/api",
				"package api\nimport \"example.com/m/internal/secret\"\nvar _ secret.V\n"+c.src, &conf)
			require.NoError(t, err)
			var got []string
			for _, msg := range CheckAPI([]*types.Package{pkg}) {
				id, _, _ := strings.Cut(strings.TrimPrefix(msg, "example.com/m/api."), " ")
				got = append(got, id)
			}
			require.Equal(t, c.want, got)
		})
	}
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

func typeCheck(fset *token.FileSet, path, src string, conf *types.Config) (*types.Package, error) {
	f, err := parser.ParseFile(fset, path+".go", src, 0)
	if err != nil {
		return nil, err
	}
	if conf == nil {
		conf = &types.Config{}
	}
	return conf.Check(path, fset, []*ast.File{f}, nil)
}
