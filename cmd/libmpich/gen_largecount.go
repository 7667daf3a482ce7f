//go:build ignore

// gen_largecount writes largecount_gen.go: the large-count (_c) form of
// every implemented function whose _c form differs from it only in
// scalar counts (MPI_Count for int) and in MPI_Count results (for int or
// MPI_Aint). Each converts, refusing counts beyond the largest int with
// MPI_ERR_COUNT, and calls the int form. Forms with count arrays (the
// vector collectives, the indexed and struct constructors) are written by
// hand in largecount_arrays.go and largecount_types.go, which know how long
// each array is. Run: go run gen_largecount.go (after gen_stubs.go's
// inputs change), then go run gen_stubs.go.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

const proto = "/usr/include/x86_64-linux-gnu/mpich/mpi_proto.h"

type cParam struct{ typ, name string }

// cProtos returns every int-returning prototype of the header, by name.
func cProtos() map[string][]cParam {
	b, err := os.ReadFile(proto)
	if err != nil {
		log.Fatal(err)
	}
	re := regexp.MustCompile(`\nint (MPIX?_\w+)\(([^()]*)\)[^;]*;`)
	out := map[string][]cParam{}
	for _, m := range re.FindAllSubmatch(b, -1) {
		name := string(m[1])
		args := strings.Join(strings.Fields(string(m[2])), " ")
		var ps []cParam
		if args != "void" && args != "" {
			for _, a := range strings.Split(args, ",") {
				a = strings.TrimSpace(a)
				i := strings.LastIndexAny(a, " *")
				typ, n := strings.TrimSpace(a[:i+1]), a[i+1:]
				if strings.HasSuffix(n, "[]") {
					typ, n = typ+"[]", strings.TrimSuffix(n, "[]")
				}
				typ = strings.TrimSpace(strings.TrimPrefix(typ, "const "))
				typ = strings.Join(strings.Fields(typ), " ")
				ps = append(ps, cParam{typ, n})
			}
		}
		out[name] = ps
	}
	return out
}

type goParam struct{ name, typ string }

// goExports returns the parameters of every exported PMPI_ function.
func goExports() map[string][]goParam {
	fset := token.NewFileSet()
	files, _ := filepath.Glob("*.go")
	out := map[string][]goParam{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "gen_") || f == "largecount_gen.go" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			log.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, parser.ParseComments)
		if err != nil {
			log.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Doc == nil || !strings.Contains(fd.Doc.Text(), "export "+fd.Name.Name) && !hasExport(fd) {
				continue
			}
			var ps []goParam
			for _, fl := range fd.Type.Params.List {
				typ := string(src[fset.Position(fl.Type.Pos()).Offset:fset.Position(fl.Type.End()).Offset])
				for _, n := range fl.Names {
					ps = append(ps, goParam{n.Name, typ})
				}
			}
			out[fd.Name.Name] = ps
		}
	}
	return out
}

func hasExport(fd *ast.FuncDecl) bool {
	for _, c := range fd.Doc.List {
		if c.Text == "//export "+fd.Name.Name {
			return true
		}
	}
	return false
}

func main() {
	cs := cProtos()
	gos := goExports()
	var names []string
	for n := range cs {
		if strings.HasSuffix(n, "_c") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var body bytes.Buffer
	count := 0
	for _, cn := range names {
		base := strings.TrimSuffix(cn, "_c")
		gBase, ok := gos["P"+base]
		if !ok {
			continue
		}
		if _, done := gos["P"+cn]; done {
			continue
		}
		pc, pb := cs[cn], cs[base]
		if len(pc) != len(pb) || len(gBase) != len(pb) {
			continue
		}
		type conv struct {
			kind          string // "pass", "count", "out"
			goName, goTyp string
			baseOut       string // base out type for "out": C.int or C.MPI_Aint
		}
		var cv []conv
		okAll := true
		for i := range pc {
			g := gBase[i]
			switch {
			case pc[i].typ == pb[i].typ:
				cv = append(cv, conv{"pass", g.name, g.typ, ""})
			case pc[i].typ == "MPI_Count" && pb[i].typ == "int":
				cv = append(cv, conv{"count", g.name, "C.MPI_Count", ""})
			case pc[i].typ == "MPI_Count" && pb[i].typ == "MPI_Aint":
				cv = append(cv, conv{"aint", g.name, "C.MPI_Count", ""})
			case pc[i].typ == "MPI_Count *" && (pb[i].typ == "int *" || pb[i].typ == "MPI_Aint *"):
				bt := "C.int"
				if pb[i].typ == "MPI_Aint *" {
					bt = "C.MPI_Aint"
				}
				cv = append(cv, conv{"out", g.name, "*C.MPI_Count", bt})
			default:
				okAll = false
			}
		}
		if !okAll {
			continue
		}
		comm := "commWorld"
		for i, p := range pc {
			if p.typ == "MPI_Comm" && (p.name == "comm" || p.name == "comm_old") {
				comm = cv[i].goName
			}
		}
		var params, args []string
		for _, c := range cv {
			params = append(params, c.goName+" "+c.goTyp)
		}
		fmt.Fprintf(&body, "\n//export P%s\nfunc P%s(%s) (mpirc C.int) {\n\tdefer guard(%q, &mpirc)\n", cn, cn, strings.Join(params, ", "), cn)
		var outs []conv
		for _, c := range cv {
			switch c.kind {
			case "pass":
				args = append(args, c.goName)
			case "aint": // both 64 bits here
				args = append(args, "C.MPI_Aint("+c.goName+")")
			case "count":
				fmt.Fprintf(&body, "\t%sInt, rc, ok := intCount(%q, %s, %s)\n\tif !ok {\n\t\treturn rc\n\t}\n", c.goName, cn, comm, c.goName)
				args = append(args, c.goName+"Int")
			case "out":
				// Results may also be inputs (MPI_Pack's position).
				fmt.Fprintf(&body, "\tvar %sOut %s\n\tif %s != nil {\n\t\t%sOut = %s(*%s)\n\t}\n", c.goName, c.baseOut, c.goName, c.goName, c.baseOut, c.goName)
				args = append(args, "&"+c.goName+"Out")
				outs = append(outs, c)
			}
		}
		// Repeated ":=" of rc and ok across counts: rename per parameter.
		fmt.Fprintf(&body, "\tif rc := P%s(%s); rc != errSuccess {\n\t\treturn rc\n\t}\n", base, strings.Join(args, ", "))
		for _, c := range outs {
			fmt.Fprintf(&body, "\tif %s != nil {\n\t\t*%s = C.MPI_Count(%sOut)\n\t}\n", c.goName, c.goName, c.goName)
		}
		body.WriteString("\treturn errSuccess\n}\n")
		count++
	}
	src := body.String()
	// Several counts in one function: give each its own rc and ok.
	src = regexp.MustCompile(`(\w+)Int, rc, ok := intCount`).ReplaceAllString(src, "${1}Int, ${1}RC, ${1}OK := intCount")
	src = regexp.MustCompile(`if !ok \{\n\t\treturn rc\n\t\}`).ReplaceAllStringFunc(src, func(s string) string { return s })
	var out bytes.Buffer
	out.WriteString(`// Code generated by gen_largecount.go from ` + proto + `; DO NOT EDIT.

package main

/*
#include "ethervia_mpi_types.h"
*/
import "C"

import "unsafe"
`)
	out.WriteString(fixChecks(src))
	b, err := format.Source(out.Bytes())
	if err != nil {
		os.WriteFile("largecount_gen.go", out.Bytes(), 0o644)
		log.Fatal(err)
	}
	if err := os.WriteFile("largecount_gen.go", b, 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("largecount_gen.go: %d functions\n", count)
}

// fixChecks pairs each "xRC, xOK := intCount" with its own check.
func fixChecks(src string) string {
	re := regexp.MustCompile(`(\w+)Int, (\w+)RC, (\w+)OK := intCount\(([^\n]*)\)\n\tif !ok \{\n\t\treturn rc\n\t\}`)
	return re.ReplaceAllString(src, "${1}Int, ${2}RC, ${3}OK := intCount(${4})\n\tif !${3}OK {\n\t\treturn ${2}RC\n\t}")
}
