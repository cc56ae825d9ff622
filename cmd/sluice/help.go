package main

import (
	"flag"
	"fmt"
	"strings"
)

// "sluice help COMMAND": one page per command, its flags listed from the same
// definitions the parser uses, so the page cannot drift from what is accepted.

var helpPages = map[string]string{
	"put": `Upload LOCAL files (directories with -r) to REMOTE.

Where the copy lands is rsync's rule:
  put -r photos box:backup       lands in backup/photos (backup is made if missing);
                                 run again, it lands there again (--sync skips what is there)
  put -r photos/ box:backup      the contents of photos land in backup
  put f.txt box:dir              into dir as dir/f.txt when dir is a directory, else as dir
  put f.txt box:dir/             into dir as dir/f.txt (dir is made if missing)
  put a b 'c*' box:dir/          several sources, or a glob: into dir (made if missing)
  put - box:f.txt                standard input, to a part name, renamed into place when done

Each file is written under .NAME.sluice-part and renamed into place when complete; -a
continues part files. A tree goes on past a file that fails and exits 1 with the count of
failures (--fail-fast stops at the first). Links inside a tree are copied as links.

--verify hashes each file as it is sent and renames it into place only if the server's
hash of it agrees; against OpenSSH add --hash-command, or the file is read back to hash it.
--checksum skips files whose remote copy has the same size and hash, whatever the times.`,
	"get": `Download REMOTE files (directories with -r) to LOCAL. REMOTE may be a glob.

Where the copy lands is rsync's rule, the same as put's:
  get -r box:photos restore      lands in restore/photos (restore is made if missing);
                                 run again, it lands there again (--sync skips what is there)
  get -r box:photos/ restore     the contents of photos land in restore
  get -r box:~ restore           ~ has no name of its own: its contents land in restore
  get box:f.txt dir              into dir as dir/f.txt when dir is a directory, else as dir
  get box:f.txt dir/             into dir as dir/f.txt (dir is made if missing)
  get 'box:logs/*.log' out/      a glob or several sources: one transfer into out/ (made if
                                 missing)
  get box:f.txt -                to standard output, as it arrives (no part file)

The server never names a local file: only what you typed, or what was listed under what
you typed. -p and --sync never change the mode or times of a directory you named as the
destination, only of what the copy made. Each file is written under NAME.sluice-part and
renamed into place when complete; -a continues part files. A tree goes on past a file
that fails and exits 1 with the count (--fail-fast stops at the first).

--verify hashes each file as it arrives and renames it into place only if the server's
hash of the source agrees; against OpenSSH add --hash-command, or the file is read twice.
--checksum skips files whose local copy has the same size and hash, whatever the times.`,
	"ls":    "List remote files and directories, sorted by name; -l shows modes, owners (names where the\nserver gives them, ids otherwise), sizes, times and link targets. REMOTE may be a glob.",
	"rm":    "Remove remote files; -r removes directories and everything in them. REMOTE may be a glob.",
	"mkdir": "Make remote directories; -p makes the parents too, and an existing directory is no error.",
	"mv": `Rename remote files or directories, as mv(1): onto a name (replacing a file there where
the server allows, posix-rename@openssh.com), or into an existing directory under the
source's name. Several sources, or a glob, need a directory. Both ends are on one server.`,
	"chmod": `Set the permission bits of remote files, as chmod(1) takes them: octal (644, 0755) or
symbolic (u+x, go-w, a=r, +x, u=rwx,g=rx,o=, X for directories). Without u, g, o or a
a symbolic mode acts on all three (the local umask is nothing to the server).`,
	"df":         "Show the size, use and free space of the file systems holding remote paths\n(statvfs@openssh.com), in 1K-blocks or with -h in K, M, G.",
	"cat":        "Write remote files to standard output, one after another. REMOTE may be a glob.",
	"help":       "Show a command's page: sluice help COMMAND. sluice -h is the one-screen summary.",
	"completion": "Print a completion script for bash or zsh: commands, flags and local paths.\n  source <(sluice completion bash)     # or in ~/.bashrc\n  source <(sluice completion zsh)      # or in ~/.zshrc",
}

// help prints the summary, or a command's page and its own flags.
func (a *app) help(args []string) error {
	if len(args) == 0 {
		printUsage(a.stdout)
		return nil
	}
	name := args[0]
	cmd, ok := commands[name]
	if !ok {
		return usagef("help: unknown command %q (want %s)", name, strings.Join(commandNames(), ", "))
	}
	fmt.Fprintf(a.stdout, "Usage: sluice [flags] %s\n\n%s\n", cmd.synopsis, helpPages[name])
	own := newFlagSet(name)
	cmd.setup(own)
	n := 0
	own.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintf(a.stdout, "\nFlags:\n")
		own.SetOutput(a.stdout)
		own.PrintDefaults()
	}
	fmt.Fprintln(a.stdout, "\nRun 'sluice -h all' for the flags every command takes (-F, -J, -o, -P, -l, -i, -v, --limit...).")
	return nil
}

// completion prints a bash script (zsh runs it through bashcompinit): the commands
// after "sluice", each command's flags and the shared ones after "-", and local paths
// otherwise. REMOTE operands are not completed: that would log in on every Tab.
func (a *app) completion(shell string) error {
	if shell != "bash" && shell != "zsh" {
		return usagef("completion: want bash or zsh, not %q", shell)
	}
	if shell == "zsh" {
		fmt.Fprintln(a.stdout, "autoload -U +X bashcompinit && bashcompinit")
	}
	shared := newFlagSet("sluice")
	a.cfg.register(shared)
	fmt.Fprintf(a.stdout, `_sluice() {
	local cur=${COMP_WORDS[COMP_CWORD]} cmd="" w
	for w in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
		case "$w" in -*) ;; *) cmd=$w; break;; esac
	done
	local shared=%q
	case "$cur" in
	-*)
		case "$cmd" in
%s		*) COMPREPLY=($(compgen -W "$shared" -- "$cur"));;
		esac;;
	*)
		if [ -z "$cmd" ]; then
			COMPREPLY=($(compgen -W %q -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi;;
	esac
}
complete -o filenames -F _sluice sluice
`, flagWords(shared), commandFlagCases(), strings.Join(commandNames(), " "))
	return nil
}

// flagWords lists fs's flags as they are typed.
func flagWords(fs *flag.FlagSet) string {
	var w []string
	fs.VisitAll(func(f *flag.Flag) {
		dash := "-"
		if len(f.Name) > 2 {
			dash = "--"
		}
		w = append(w, dash+f.Name)
	})
	return strings.Join(w, " ")
}

// commandFlagCases is a bash case arm per command, completing its own flags and the
// shared ones.
func commandFlagCases() string {
	var b strings.Builder
	for _, n := range commandNames() {
		own := newFlagSet(n)
		commands[n].setup(own)
		fmt.Fprintf(&b, "\t\t%s) COMPREPLY=($(compgen -W %q -- \"$cur\"));;\n", n, flagWords(own)+" $shared")
	}
	return b.String()
}
