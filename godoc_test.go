package sftp

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGodocNamesOnlyExportedThings: the documentation a user reads (doc comments of
// exported declarations, and of the exported fields of exported types) names no
// unexported identifier of the package, which the user can neither see nor use
// (TreeError.Failed once said "the first maxTreeFailures kept"). Only identifiers
// written in camelCase are looked for: a one-word unexported name (budget, lanes) is
// also an English word.
func TestGodocNamesOnlyExportedThings(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	camel := regexp.MustCompile(`^[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*$`)
	hidden := map[string]bool{}
	var docs []doc
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.ParseComments)
		require.NoError(t, err)
		for _, name := range topLevelNames(f) {
			if camel.MatchString(name) {
				hidden[name] = true
			}
		}
		docs = append(docs, exportedDocs(fset, f)...)
	}
	require.NotEmpty(t, hidden)
	word := regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	var found []string
	for _, d := range docs {
		for _, w := range word.FindAllString(d.text, -1) {
			if hidden[w] {
				found = append(found, d.where+": "+w)
			}
		}
	}
	require.Empty(t, found, "exported documentation names unexported identifiers")
}

type doc struct{ where, text string }

// topLevelNames lists the package-level functions, types, constants and variables f
// declares, and the methods.
func topLevelNames(f *ast.File) []string {
	var names []string
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			names = append(names, d.Name.Name)
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					names = append(names, s.Name.Name)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}

// exportedDocs gathers the doc comments a user of the package reads in f.
func exportedDocs(fset *token.FileSet, f *ast.File) []doc {
	var out []doc
	add := func(pos token.Pos, groups ...*ast.CommentGroup) {
		for _, g := range groups {
			if g != nil {
				out = append(out, doc{fset.Position(pos).String(), g.Text()})
			}
		}
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Name.IsExported() && (d.Recv == nil || exportedRecv(d.Recv)) {
				add(d.Pos(), d.Doc)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					add(s.Pos(), d.Doc, s.Doc, s.Comment)
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, fld := range st.Fields.List {
							if len(fld.Names) > 0 && fld.Names[0].IsExported() {
								add(fld.Pos(), fld.Doc, fld.Comment)
							}
						}
					}
				case *ast.ValueSpec:
					if s.Names[0].IsExported() {
						add(s.Pos(), d.Doc, s.Doc, s.Comment)
					}
				}
			}
		}
	}
	return out
}

func exportedRecv(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}
