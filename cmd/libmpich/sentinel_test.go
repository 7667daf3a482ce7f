package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoSentinelInGoPointers: no exported function takes a status as a Go
// pointer (MPI_STATUS_IGNORE is (MPI_Status *)1), nor an attribute value
// or extra state (the program's void *, often a small integer) as an
// unsafe.Pointer. The runtime takes such values in pointer-typed slots for
// bad pointers and aborts when it copies the stack ("invalid pointer found
// on stack"): it did, in MPI_Comm_dup's attribute copy under load.
func TestNoSentinelInGoPointers(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	valueParams := map[string][]string{ // function: parameters that are the program's void * values
		"PMPI_Comm_set_attr": {"val"}, "PMPI_Attr_put": {"val"},
		"PMPI_Comm_create_keyval": {"extra"}, "PMPI_Keyval_create": {"extra"},
		"PMPI_Grequest_start": {"extra"},
		"PMPI_Type_set_attr":  {"val"}, "PMPI_Type_create_keyval": {"extra"},
	}
	seen := 0
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "gen_") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !strings.HasPrefix(fd.Name.Name, "PMPI_") {
				continue
			}
			for _, p := range fd.Type.Params.List {
				typ := types(p.Type)
				for _, n := range p.Names {
					if typ == "*C.MPI_Status" {
						t.Errorf("%s: %s takes a status as *C.MPI_Status: use C.uintptr_t and statusPtr", fd.Name.Name, n.Name)
					}
					for _, v := range valueParams[fd.Name.Name] {
						if n.Name == v {
							seen++
							if typ != "C.uintptr_t" {
								t.Errorf("%s: %s is %s, want C.uintptr_t", fd.Name.Name, n.Name, typ)
							}
						}
					}
				}
			}
		}
	}
	if seen != 7 {
		t.Errorf("checked %d value parameters, want 7: the list above is out of date", seen)
	}
}

// types renders a parameter type.
func types(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return "*" + types(x.X)
	case *ast.SelectorExpr:
		return types(x.X) + "." + x.Sel.Name
	case *ast.Ident:
		return x.Name
	}
	return "?"
}
