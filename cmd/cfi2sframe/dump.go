package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newDumpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "dump FILE...",
		Short: "Print the .sframe section of ELF files or raw SFrame sections",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("dump: not implemented yet")
		},
	}
}
