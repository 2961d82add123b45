package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/buildinfo"
)

// versionInfo is what `nodewright version` prints: internal/buildinfo's
// values, the ones every nodewright process logs on its first line.
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
}

func (v versionInfo) writeTable(w io.Writer) error {
	_, err := fmt.Fprintf(w, "nodewright %s\ncommit     %s\ngo         %s\n", v.Version, v.Commit, v.GoVersion)
	return err
}

func newVersionCommand(c cli) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "print the version, commit and Go version of this build",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			info := versionInfo{Version: buildinfo.Version(), Commit: buildinfo.Commit(), GoVersion: buildinfo.GoVersion()}
			*c.code = writeReport("version", output, info, versionInfo.writeTable, c.stdout, c.stderr)
			return nil
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
