package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
)

// Where a put or get lands: rsync's rule, the same for both directions.
//
//   - A directory given without a trailing slash lands inside DST under its own name,
//     as typed, whether DST exists or not (DST is made if missing): running the same
//     command twice lands in the same place, where the second run merges (and with
//     --sync skips what is there).
//   - A directory given with a trailing slash, or one whose typed name has no base
//     name of its own (~, ~user, ., .., /, host:), has its contents land in DST, each
//     entry under the name the listing gave it. DST itself is then not the copy: -p
//     and --sync never change its mode or times.
//   - A file lands inside DST under its name when DST is an existing directory or ends
//     in '/'; otherwise it is DST. A file with no typed base name (~ naming a file) has
//     no name to land under inside a directory, and is refused there.
//   - Several sources, or a glob's matches: DST is a directory, and each lands under
//     its typed or listed base name.
//
// So the CLI never names a local file from anything but what the user typed or what
// a listing gave under what they typed: a server cannot choose the name of the copy
// (the class of CVE-2019-6111) by what it says the home directory is.

// landing is where one source's copy goes.
type landing int

const (
	landAs       landing = iota // the copy is DST itself
	landInside                  // the copy is DST/<name>
	landContents                // the source's entries land in DST, each under its listed name
)

func (l landing) String() string {
	return [...]string{"as", "inside", "contents"}[l]
}

// errNoName refuses a file that would land in a directory under a name nobody typed.
var errNoName = errors.New("names a file by no name of its own (as ~ does): give the destination's file name")

// landOf applies the rule to one source: name is its typed or listed base name ("" when
// it has none), slash whether it was typed with a trailing slash, srcDir whether it is a
// directory, several whether the command copies more than one source, and dstDir
// whether DST is an existing directory or was typed with a trailing slash.
func landOf(name string, slash, srcDir, several, dstDir bool) (landing, error) {
	switch {
	case srcDir && (slash || name == ""):
		return landContents, nil
	case srcDir:
		return landInside, nil
	case name == "" && (several || dstDir):
		return 0, errNoName
	case several || dstDir:
		return landInside, nil
	}
	return landAs, nil
}

// remoteBase is the base name a REMOTE operand's path, as typed, gives its copy, and
// whether it ends in '/'. A path whose last element is ".", ".." or the root, or that
// is ~ or ~user alone, has none: the server would choose it.
func remoteBase(typed string) (name string, slash bool) {
	slash = strings.HasSuffix(typed, "/")
	trimmed := strings.TrimRight(typed, "/")
	if strings.HasPrefix(trimmed, "~") && !strings.Contains(trimmed, "/") {
		return "", slash
	}
	name = path.Base(trimmed)
	if trimmed == "" || !plainListedName(name) {
		return "", slash
	}
	return name, slash
}

// localBase is remoteBase for a local operand, in the local system's syntax.
func localBase(typed string) (name string, slash bool) {
	slash = strings.HasSuffix(typed, "/") || strings.HasSuffix(typed, string(filepath.Separator))
	name = filepath.Base(typed)
	if !plainListedName(name) {
		return "", slash
	}
	return name, slash
}

// plainListedName reports whether a name from a listing (a server's, or a base name
// typed) names one entry of the directory it is joined to and nothing else: not ".",
// "..", empty, or holding a separator of either side, and local by the OS's own rules.
func plainListedName(name string) bool {
	return name != "" && name != "." && name != ".." &&
		!strings.ContainsAny(name, "/"+string(filepath.Separator)) && filepath.IsLocal(name)
}

// source is one thing a put or get copies, as the user named it.
type source struct {
	path  string // on its side: the remote path with ~ expanded, or the local path
	name  string // its typed or listed base name; "" when it has none
	slash bool   // typed with a trailing slash
	dir   bool   // a directory (looked at only where it decides the landing)
}

// copyPlan is a put or get worked out: either one file to one exact name, or roots
// that each land in dir under their base names (one GetAll or PutAll), and links
// listed under a source whose contents are copied, which the CLI makes itself.
type copyPlan struct {
	one      *copyPair  // a single file, copied to exactly this name
	roots    []string   // the sources of GetAll or PutAll, on the source side
	links    []copyPair // links directly under a contents source
	dir      string     // where roots and links land
	makeDir  bool       // dir is missing and is made first (for one file too, typed DST/)
	copyRoot string     // for the summary: the copy's name when there is one root, else dir
}

// planCopy applies the landing rule to each source (whose dir is known where it
// decides), for op's direction: join names a copy in the destination, list lists a
// source whose contents are copied.
func planCopy(op string, srcs []source, several bool, dst destInfo, join func(dir, name string) string,
	list func(dir string) ([]listedEntry, error)) (*copyPlan, error) {
	pl := &copyPlan{dir: dst.path, copyRoot: dst.path}
	var named []copyPair
	inside := false // a single file copied inside dst
	for _, s := range srcs {
		l, err := landOf(s.name, s.slash, s.dir, several, dst.isDir || dst.slash)
		if err != nil {
			return nil, fmt.Errorf("%s: %s %w", op, escapeText(s.path), err)
		}
		switch {
		case l == landAs:
			pl.one = &copyPair{s.path, dst.path}
		case l == landInside && !several && !s.dir:
			pl.one, inside = &copyPair{s.path, join(dst.path, s.name)}, true
		case l == landInside:
			pl.roots = append(pl.roots, s.path)
			named = append(named, copyPair{s.path, s.name})
			if !several {
				pl.copyRoot = join(dst.path, s.name)
			}
		default:
			entries, err := list(s.path)
			if err != nil {
				return nil, err
			}
			named = pl.addContents(named, entries, dst.path, join)
		}
	}
	if pl.one == nil && dst.exists && !dst.isDir {
		return nil, fmt.Errorf("%s: not a directory: %s", op, dst.path)
	}
	pl.makeDir = (pl.one == nil || inside) && !dst.exists
	return pl, checkNames(op, named)
}

// addContents adds the entries of a source whose contents land in dir: links are
// made by the command, the rest are roots. It returns named with their names added.
func (pl *copyPlan) addContents(named []copyPair, entries []listedEntry, dir string, join func(dir, name string) string) []copyPair {
	for _, e := range entries {
		named = append(named, copyPair{e.src, e.name})
		if e.link {
			pl.links = append(pl.links, copyPair{e.src, join(dir, e.name)})
		} else {
			pl.roots = append(pl.roots, e.src)
		}
	}
	return named
}

// listedEntry is an entry of a directory whose contents are copied.
type listedEntry struct {
	src  string // its path on the source side
	name string // its name in the listing
	link bool   // a symbolic link, made as a link rather than followed
}

// keepListed reports whether an entry of a contents source is copied: directories,
// regular files and links, as in a tree, but not part files of unfinished transfers,
// and only plain names.
func keepListed(name string, t fs.FileMode) bool {
	if strings.HasSuffix(name, ".sluice-part") || !plainListedName(name) {
		return false
	}
	return t.IsDir() || t.IsRegular() || t&fs.ModeSymlink != 0
}

// copyPair is one source and the exact name of its copy.
type copyPair struct{ src, dst string }

// checkNames refuses two sources that would land on the same name in the destination
// directory ('box:*/log.txt' out/ matches a/log.txt and b/log.txt): the later copy
// would replace the earlier one. Checked before anything is copied.
func checkNames(op string, named []copyPair) error {
	first := make(map[string]string, len(named))
	for _, n := range named {
		if prev, ok := first[n.dst]; ok {
			return fmt.Errorf("%s: %s and %s would both be copied to %s in the destination; copy them separately",
				op, escapeText(prev), escapeText(n.src), escapeText(n.dst))
		}
		first[n.dst] = n.src
	}
	return nil
}
