// Command canopy is the single binary of the Canopy file system: servers,
// file commands and administration. See `canopy --help`.
package main

import (
	"os"

	"github.com/canopyfs/canopy/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:])) }
