package lint

import (
	"fmt"
	"go/types"
	"sort"
	"strings"
)

// IsInternal reports whether importPath has an "internal" element: only
// the tree above it may import it (the go command's rule), so a caller
// outside the module can never name its types.
func IsInternal(importPath string) bool {
	return strings.Contains("/"+importPath+"/", "/internal/")
}

// CheckAPI returns one message per exported identifier of pkgs (the
// module's importable, non-internal packages) whose signature mentions a
// type from an internal package: the type of an exported var or const,
// the parameters and results of an exported func, of an exported method
// of an exported type (promoted methods included) and of an exported
// interface method, the type of an exported struct field. A caller
// outside the module cannot name such a type (it cannot declare a
// variable of it, nor write the function type), so the type must be
// exported where the API is, as a type or an alias.
//
// An exported alias of an internal type (type X = internal.Y) is the way
// to export it: it is allowed, and the alias's target then belongs to the
// API, so its exported fields and methods are checked as well.
func CheckAPI(pkgs []*types.Package) []string {
	c := apiChecker{aliased: map[*types.TypeName]string{}, seen: map[string]bool{}}
	for _, p := range pkgs {
		for _, name := range p.Scope().Names() {
			obj := p.Scope().Lookup(name)
			tn, ok := obj.(*types.TypeName)
			if !ok || !obj.Exported() || !tn.IsAlias() {
				continue
			}
			if n, ok := types.Unalias(tn.Type()).(*types.Named); ok && n.Obj().Pkg() != nil && IsInternal(n.Obj().Pkg().Path()) {
				c.aliased[n.Origin().Obj()] = p.Path() + "." + name
			}
		}
	}
	for _, p := range pkgs {
		for _, name := range p.Scope().Names() {
			obj := p.Scope().Lookup(name)
			if !obj.Exported() {
				continue
			}
			where := p.Path() + "." + name
			switch o := obj.(type) {
			case *types.TypeName:
				c.typeName(where, o)
			case *types.Func, *types.Var, *types.Const:
				c.walk(where, o.Type())
			}
		}
	}
	sort.Strings(c.problems)
	return c.problems
}

type apiChecker struct {
	// aliased maps an internal type to the exported alias that names it.
	aliased  map[*types.TypeName]string
	problems []string
	// seen holds the problems reported, to report each once.
	seen map[string]bool
}

func (c *apiChecker) report(where string, n *types.Named) {
	msg := fmt.Sprintf("%s mentions %s.%s, a type of an internal package that no exported alias names",
		where, n.Obj().Pkg().Path(), n.Obj().Name())
	if !c.seen[msg] {
		c.seen[msg] = true
		c.problems = append(c.problems, msg)
	}
}

// typeName checks an exported type declaration: its structure and its
// exported methods, or, for an alias of an internal type, that type's.
func (c *apiChecker) typeName(where string, tn *types.TypeName) {
	t := tn.Type()
	if tn.IsAlias() {
		n, ok := types.Unalias(t).(*types.Named)
		if !ok {
			c.walk(where, types.Unalias(t))
			return
		}
		if n.Obj().Pkg() == nil || !IsInternal(n.Obj().Pkg().Path()) {
			return // a public type: checked where it is declared
		}
		t = n
	}
	n, ok := t.(*types.Named)
	if !ok {
		return
	}
	c.walkStructure(where, n.Underlying())
	for _, recv := range []types.Type{n, types.NewPointer(n)} {
		ms := types.NewMethodSet(recv)
		for i := range ms.Len() {
			m := ms.At(i).Obj()
			if m.Exported() {
				c.walk(where+"."+m.Name(), m.Type())
			}
		}
	}
}

// walkStructure checks the exported parts of a declared type's
// underlying type: fields of a struct, methods of an interface, or the
// type itself.
func (c *apiChecker) walkStructure(where string, u types.Type) {
	switch u := u.(type) {
	case *types.Struct:
		for i := range u.NumFields() {
			if f := u.Field(i); f.Exported() {
				c.walk(where+"."+f.Name(), f.Type())
			}
		}
	case *types.Interface:
		for i := range u.NumMethods() {
			if m := u.Method(i); m.Exported() {
				c.walk(where+"."+m.Name(), m.Type())
			}
		}
	default:
		c.walk(where, u)
	}
}

// walk reports every internal named type t mentions. A named type's own
// structure is not entered: a public one is checked where it is
// declared, an internal one is the problem.
func (c *apiChecker) walk(where string, t types.Type) {
	switch t := t.(type) {
	case *types.Alias:
		if obj := t.Obj(); obj.Exported() && obj.Pkg() != nil && !IsInternal(obj.Pkg().Path()) {
			return // a public alias: checked where it is declared
		}
		c.walk(where, types.Unalias(t))
	case *types.Named:
		if pkg := t.Obj().Pkg(); pkg != nil && IsInternal(pkg.Path()) {
			if _, ok := c.aliased[t.Origin().Obj()]; !ok {
				c.report(where, t)
			}
		}
		if args := t.TypeArgs(); args != nil {
			for i := range args.Len() {
				c.walk(where, args.At(i))
			}
		}
	case *types.Pointer:
		c.walk(where, t.Elem())
	case *types.Slice:
		c.walk(where, t.Elem())
	case *types.Array:
		c.walk(where, t.Elem())
	case *types.Chan:
		c.walk(where, t.Elem())
	case *types.Map:
		c.walk(where, t.Key())
		c.walk(where, t.Elem())
	case *types.Signature:
		for _, tuple := range []*types.Tuple{t.Params(), t.Results()} {
			for i := range tuple.Len() {
				c.walk(where, tuple.At(i).Type())
			}
		}
	case *types.Struct, *types.Interface:
		c.walkStructure(where, t)
	}
	// A type parameter's constraint is not entered: a constraint may
	// mention the parameter itself.
}
