package lint

// The docs checker: the repository's Markdown files are checked like code.
// CheckDoc reports, for one document,
//
//   - a relative link [text](path) or [text](path#anchor) whose file does
//     not exist, or whose anchor names no heading of the Markdown file it
//     points into (GitHub's anchors: lowercase, spaces to '-', punctuation
//     other than '-' and '_' dropped, repeats suffixed -1, -2, ...);
//   - a backquoted Go file path (`dir/file.go`, `file.go`) that names no Go
//     file. The rule: the path resolves if it is relative to the document's
//     directory, or if some Go file of the repository is at that path or
//     ends in "/" + that path. So a bare name must exist somewhere in the
//     tree, and `sim/sim.go` resolves to internal/harness/sim/sim.go: a path
//     relative to a package named in it (or to the root) is fine;
//   - a backquoted qualified name `pkg.Name` or `pkg.Type.Member` whose
//     first element is the last element of a (non-main) package directory
//     of the repository and whose Name (or Type.Member) that package does
//     not declare. Declared are its types, funcs, vars and consts, the
//     methods of its types, the fields of its struct types and the methods
//     of its interface types, including what a type embeds from the same
//     package; test files count (docs cite tests and examples by name).
//     Where two packages share a last element, a name either declares is
//     accepted. A two-element `pkg.Name` may also name a method or field
//     cited without its type (`log.AppendAsLeader`). Dotted names of three
//     or more all-lowercase elements are Kafka configuration keys
//     (`remote.log.copy.disable`) and are not checked. Names whose first element is not one of these packages
//     (Kafka's `LogSegment.recover`, pebble's `vfs.FS`) are not checked.
//
// Inline code spans and links are checked. Of fenced code blocks, only
// those marked go are, and only for the qualified names above.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// DocIndex is what documents are checked against.
type DocIndex struct {
	// Files and Dirs hold every file and directory of the repository as
	// slash paths relative to its root.
	Files map[string]bool
	Dirs  map[string]bool
	// GoFiles lists the repository's Go files (slash paths).
	GoFiles []string
	// Markdown maps a Markdown file's path to its text, for anchors.
	Markdown map[string]string
	// Packages maps a package directory's last element to the packages
	// of that name.
	Packages map[string][]*PackageDecls
}

// PackageDecls are the names one package declares.
type PackageDecls struct {
	Dir string
	// Top holds the top-level names, Types the type names among them.
	Top, Types map[string]bool
	// AnyMember holds the names of every method and field of the package.
	AnyMember map[string]bool
	// Members maps a type name to the names of its methods and fields.
	Members map[string]map[string]bool
	// Embeds maps a type name to the same-package types it embeds; Open
	// holds the types that embed another package's type (any member is
	// accepted for them).
	Embeds map[string][]string
	Open   map[string]bool
	// Foreign maps a type defined as another package's type (type A =
	// pkg.B, type A pkg.B) to that type, as written: pkg and B.
	Foreign map[string][2]string
}

func newPackageDecls(dir string) *PackageDecls {
	return &PackageDecls{Dir: dir, Top: map[string]bool{}, Types: map[string]bool{},
		AnyMember: map[string]bool{}, Members: map[string]map[string]bool{},
		Embeds: map[string][]string{}, Open: map[string]bool{}, Foreign: map[string][2]string{}}
}

func (p *PackageDecls) member(typ, name string) {
	if p.Members[typ] == nil {
		p.Members[typ] = map[string]bool{}
	}
	p.Members[typ][name] = true
	p.AnyMember[name] = true
}

// hasMember reports whether typ declares or embeds (in this package) name.
func (p *PackageDecls) hasMember(typ, name string, seen map[string]bool) bool {
	if seen[typ] {
		return false
	}
	seen[typ] = true
	if p.Members[typ][name] || p.Open[typ] {
		return true
	}
	for _, e := range p.Embeds[typ] {
		if p.hasMember(e, name, seen) {
			return true
		}
	}
	return false
}

// skipDir reports the directories the checker does not read: hidden ones,
// test data and vendored trees.
func skipDir(name string) bool {
	return name != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
		name == "testdata" || name == "vendor" || name == "node_modules")
}

// LoadDocIndex walks the repository at root and parses its Go files
// (declarations only).
func LoadDocIndex(root string) (*DocIndex, error) {
	idx := &DocIndex{Files: map[string]bool{}, Dirs: map[string]bool{".": true},
		Markdown: map[string]string{}, Packages: map[string][]*PackageDecls{}}
	byDir := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipDir(d.Name()) && rel != "." {
				return filepath.SkipDir
			}
			idx.Dirs[rel] = true
			return nil
		}
		idx.Files[rel] = true
		switch {
		case strings.HasSuffix(rel, ".go"):
			idx.GoFiles = append(idx.GoFiles, rel)
			byDir[path.Dir(rel)] = append(byDir[path.Dir(rel)], rel)
		case strings.HasSuffix(rel, ".md"):
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			idx.Markdown[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	for dir, files := range byDir {
		pd := newPackageDecls(dir)
		main := false
		for _, f := range files {
			src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
			if err != nil {
				return nil, err
			}
			af, err := parser.ParseFile(fset, f, src, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			if af.Name.Name == "main" {
				main = true
			}
			addDecls(pd, af)
		}
		if main {
			continue
		}
		last := path.Base(dir)
		idx.Packages[last] = append(idx.Packages[last], pd)
	}
	return idx, nil
}

// AddSource adds one Go file's declarations to the package at dir (for
// tests of the checker).
func (idx *DocIndex) AddSource(dir, src string) error {
	af, err := parser.ParseFile(token.NewFileSet(), dir+"/x.go", src, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	last := path.Base(dir)
	var pd *PackageDecls
	for _, p := range idx.Packages[last] {
		if p.Dir == dir {
			pd = p
		}
	}
	if pd == nil {
		pd = newPackageDecls(dir)
		idx.Packages[last] = append(idx.Packages[last], pd)
	}
	addDecls(pd, af)
	return nil
}

func addDecls(pd *PackageDecls, f *ast.File) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				pd.Top[d.Name.Name] = true
				continue
			}
			if r := recvName(d.Recv.List[0].Type); r != "" {
				pd.member(r, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					pd.Top[s.Name.Name] = true
					pd.Types[s.Name.Name] = true
					addTypeMembers(pd, s.Name.Name, s.Type)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						pd.Top[n.Name] = true
					}
				}
			}
		}
	}
}

func addTypeMembers(pd *PackageDecls, typ string, t ast.Expr) {
	var fields *ast.FieldList
	switch t := t.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	case *ast.Ident:
		// type A B: A has B's fields.
		pd.Embeds[typ] = append(pd.Embeds[typ], t.Name)
		return
	case *ast.SelectorExpr:
		// type A = pkg.B or type A pkg.B: B's members, if pkg is ours.
		if x, ok := t.X.(*ast.Ident); ok {
			pd.Foreign[typ] = [2]string{x.Name, t.Sel.Name}
		}
		pd.Open[typ] = true
		return
	default:
		return
	}
	for _, f := range fields.List {
		if len(f.Names) > 0 {
			for _, n := range f.Names {
				pd.member(typ, n.Name)
			}
			continue
		}
		// Embedded: a same-package type, or another package's.
		switch e := unparen(f.Type).(type) {
		case *ast.Ident:
			pd.member(typ, e.Name)
			pd.Embeds[typ] = append(pd.Embeds[typ], e.Name)
		case *ast.SelectorExpr:
			pd.member(typ, e.Sel.Name)
			pd.Open[typ] = true
		default:
			pd.Open[typ] = true
		}
	}
}

func unparen(e ast.Expr) ast.Expr {
	for {
		switch x := e.(type) {
		case *ast.ParenExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		default:
			return e
		}
	}
}

func recvName(e ast.Expr) string {
	if id, ok := unparen(e).(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// DocException is a backquoted name the checker must not flag, with why.
type DocException struct {
	Name, Reason string
}

// Markdown scanning.

var (
	linkRE = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	// A Go file path: letters, digits, _ . / - and a .go ending.
	goFileRE = regexp.MustCompile(`^[A-Za-z0-9_./-]+\.go$`)
	// A qualified name: lowercase first element not preceded by an
	// identifier character or a dot.
	qualRE    = regexp.MustCompile(`(^|[^A-Za-z0-9_.])([a-z][a-z0-9]*)((?:\.[A-Za-z_][A-Za-z0-9_]*)+)`)
	headingRE = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlIDRE  = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// fileExtensions are endings that make `a.b` a file name, not a Go name.
var fileExtensions = map[string]bool{"md": true, "go": true, "json": true, "yaml": true,
	"yml": true, "txt": true, "sh": true, "mod": true, "sum": true, "toml": true, "log": true,
	"index": true, "timeindex": true, "snapshot": true, "sql": true, "proto": true}

// docText is a document with its fenced blocks removed and its inline code
// spans pulled out.
type docText struct {
	// prose is the text outside fences with each code span blanked.
	prose []string
	// spans are the inline code spans with their line numbers.
	spans []codeSpan
	// goLines are the lines of fenced blocks marked go.
	goLines []codeSpan
}

type codeSpan struct {
	line int
	text string
}

func fenceMarker(line string) string {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return ""
	}
	for _, m := range []string{"```", "~~~"} {
		if strings.HasPrefix(t, m) {
			c := m[0]
			n := 0
			for n < len(t) && t[n] == c {
				n++
			}
			return t[:n]
		}
	}
	return ""
}

func scanDoc(src string) docText {
	var d docText
	lines := strings.Split(src, "\n")
	// Lines outside fences; fenced lines become empty.
	fence, goFence := "", false
	out := make([]string, len(lines))
	for i, l := range lines {
		if fence != "" {
			if m := fenceMarker(l); m != "" && strings.HasPrefix(m, fence) && strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), fence[:1])) == "" {
				fence = ""
			} else if goFence {
				d.goLines = append(d.goLines, codeSpan{line: i + 1, text: l})
			}
			continue
		}
		if m := fenceMarker(l); m != "" {
			fence = m
			goFence = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), m[:1])) == "go"
			continue
		}
		out[i] = l
	}
	// Inline code spans may cross line ends within a paragraph.
	text := strings.Join(out, "\n")
	var prose strings.Builder
	line := 1
	for i := 0; i < len(text); {
		if text[i] == '\n' {
			line++
			prose.WriteByte('\n')
			i++
			continue
		}
		if text[i] != '`' {
			prose.WriteByte(text[i])
			i++
			continue
		}
		n := 0
		for i+n < len(text) && text[i+n] == '`' {
			n++
		}
		open := strings.Repeat("`", n)
		// Find the closing run of exactly n backquotes.
		j := i + n
		end := -1
		for j < len(text) {
			k := strings.Index(text[j:], open)
			if k < 0 {
				break
			}
			k += j
			m := 0
			for k+m < len(text) && text[k+m] == '`' {
				m++
			}
			if m == n {
				end = k
				break
			}
			j = k + m
		}
		if end < 0 {
			prose.WriteString(open)
			i += n
			continue
		}
		body := text[i+n : end]
		d.spans = append(d.spans, codeSpan{line: line, text: strings.TrimSpace(strings.ReplaceAll(body, "\n", " "))})
		for _, c := range body {
			if c == '\n' {
				prose.WriteByte('\n')
				line++
			}
		}
		prose.WriteString(strings.Repeat(" ", 2)) // keep words apart
		i = end + n
	}
	d.prose = strings.Split(prose.String(), "\n")
	return d
}

// Anchors returns the GitHub anchors of a Markdown document's headings.
func Anchors(src string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	d := scanDoc(src)
	lines := strings.Split(src, "\n")
	for i, l := range d.prose {
		for _, m := range htmlIDRE.FindAllStringSubmatch(l, -1) {
			anchors[m[1]] = true
		}
		if headingRE.FindStringSubmatch(l) == nil {
			continue
		}
		// The prose line lost its code spans; use the source line.
		m := headingRE.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		a := slug(m[2])
		if n, ok := seen[a]; ok {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n+1)
		} else {
			seen[a] = 0
		}
		anchors[a] = true
	}
	return anchors
}

var mdLinkInHeading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// slug is GitHub's anchor for a heading's text.
func slug(h string) string {
	h = mdLinkInHeading.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// CheckDoc checks one Markdown document (its repository path and text)
// against idx and returns its problems, each "path:line: message".
// exceptions are backquoted names not to flag.
func CheckDoc(docPath, src string, idx *DocIndex, exceptions []DocException) []string {
	var problems []string
	report := func(line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s", docPath, line, fmt.Sprintf(format, args...)))
	}
	except := map[string]bool{}
	for _, e := range exceptions {
		except[e.Name] = true
	}
	dir := path.Dir(docPath)
	d := scanDoc(src)
	for i, l := range d.prose {
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			if msg := checkLink(dir, docPath, m[1], idx); msg != "" {
				report(i+1, "%s", msg)
			}
		}
	}
	for _, s := range d.goLines {
		for _, m := range qualRE.FindAllStringSubmatch(s.text, -1) {
			pkg, rest := m[2], strings.Split(m[3][1:], ".")
			if pkgs := idx.Packages[pkg]; len(pkgs) > 0 && !except[pkg+"."+strings.Join(rest, ".")] {
				if msg := checkName(pkg, rest, idx); msg != "" {
					report(s.line, "%s", msg)
				}
			}
		}
	}
	for _, s := range d.spans {
		t := s.text
		if goFileRE.MatchString(t) {
			if !goFileExists(dir, t, idx) {
				report(s.line, "`%s`: no such Go file", t)
			}
			continue
		}
		if except[t] {
			continue
		}
		for _, m := range qualRE.FindAllStringSubmatch(t, -1) {
			pkg, rest := m[2], strings.Split(m[3][1:], ".")
			if except[pkg+"."+strings.Join(rest, ".")] {
				continue
			}
			if fileExtensions[rest[len(rest)-1]] || configKey(rest) {
				continue
			}
			pkgs := idx.Packages[pkg]
			if len(pkgs) == 0 {
				continue
			}
			if msg := checkName(pkg, rest, idx); msg != "" {
				report(s.line, "`%s`: %s", t, msg)
			}
		}
	}
	return problems
}

func checkName(pkg string, rest []string, idx *DocIndex) string {
	pkgs := idx.Packages[pkg]
	for _, p := range pkgs {
		if len(rest) == 1 {
			// `pkg.Name`: a top-level name, or a method or field
			// cited without its type (`log.AppendAsLeader`).
			if p.Top[rest[0]] || p.AnyMember[rest[0]] {
				return ""
			}
			continue
		}
		if !p.Top[rest[0]] {
			continue
		}
		// Only a type's members are known; a var's or func's are not.
		if !p.Types[rest[0]] {
			return ""
		}
		if f, ok := p.Foreign[rest[0]]; ok && len(idx.Packages[f[0]]) > 0 && f[0] != pkg {
			// Another of the module's packages: its type's members.
			if checkName(f[0], []string{f[1], rest[1]}, idx) == "" {
				return ""
			}
			continue
		}
		if p.hasMember(rest[0], rest[1], map[string]bool{}) {
			return ""
		}
	}
	dirs := make([]string, len(pkgs))
	for i, p := range pkgs {
		dirs[i] = p.Dir
	}
	sort.Strings(dirs)
	name := pkg + "." + rest[0]
	if len(rest) > 1 {
		name += "." + rest[1]
	}
	return fmt.Sprintf("%s is not declared in %s", name, strings.Join(dirs, " or "))
}

// configKey reports a Kafka configuration key such as
// `remote.log.manager.task.interval.ms`: three or more elements, all
// lowercase letters and digits.
func configKey(rest []string) bool {
	if len(rest) < 2 {
		return false
	}
	for _, e := range rest {
		for _, r := range e {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
				return false
			}
		}
	}
	return true
}

func goFileExists(dir, p string, idx *DocIndex) bool {
	if idx.Files[path.Join(dir, p)] {
		return true
	}
	for _, f := range idx.GoFiles {
		if f == p || strings.HasSuffix(f, "/"+p) {
			return true
		}
	}
	return false
}

func checkLink(dir, docPath, target string, idx *DocIndex) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	file, anchor, _ := strings.Cut(target, "#")
	resolved := docPath
	if file != "" {
		if strings.HasPrefix(file, "/") {
			resolved = path.Clean(strings.TrimPrefix(file, "/"))
		} else {
			resolved = path.Clean(path.Join(dir, file))
		}
		if !idx.Files[resolved] && !idx.Dirs[resolved] {
			return fmt.Sprintf("link %s: %s does not exist", target, resolved)
		}
	}
	if anchor == "" || !strings.HasSuffix(resolved, ".md") {
		return ""
	}
	src, ok := idx.Markdown[resolved]
	if !ok {
		return fmt.Sprintf("link %s: %s is not a Markdown file the checker read", target, resolved)
	}
	if !Anchors(src)[anchor] {
		return fmt.Sprintf("link %s: %s has no heading #%s", target, resolved, anchor)
	}
	return ""
}
