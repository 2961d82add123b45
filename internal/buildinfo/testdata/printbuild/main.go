package main

import (
	"fmt"

	"github.com/nodewright/nodewright/internal/buildinfo"
)

func main() { fmt.Println(buildinfo.Version(), buildinfo.Commit()) }
