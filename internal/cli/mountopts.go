package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Mount options the Linux way: `canopy mount -o allow_other,ro,...`, and
// the mount.canopy helper that mount(8) runs for `mount -t canopy ADDR
// DIR` and /etc/fstab lines of type canopy.

// mountHelperName is the name under which the canopy binary acts as
// mount(8)'s helper (a link /sbin/mount.canopy -> canopy).
const mountHelperName = "mount.canopy"

// genericMountOptions are the options mount(8) and systemd act on or pass
// along, which the mount itself ignores: _netdev orders the mount after
// the network (systemd reads it from fstab), nofail, noauto, user and
// the x- options are for mount(8), fstab and systemd.
var genericMountOptions = map[string]bool{
	"defaults": true, "auto": true, "noauto": true, "nofail": true, "_netdev": true,
	"user": true, "nouser": true, "users": true, "owner": true, "group": true,
	"exec": true, "noexec": true, "suid": true, "nosuid": true, "dev": true, "nodev": true,
	"atime": true, "noatime": true, "relatime": true, "norelatime": true, "strictatime": true,
	"rw": true, "async": true, "sync": true, "dirsync": true, "silent": true, "loud": true,
}

// applyMountOptions sets o (and the server address, for addr=) from a
// comma-separated -o list.
func applyMountOptions(list string, o *mountFlags, addr *string) error {
	for _, opt := range strings.Split(list, ",") {
		opt = strings.TrimSpace(opt)
		if opt == "" {
			continue
		}
		key, val, hasVal := strings.Cut(opt, "=")
		var err error
		switch {
		case key == "allow_other":
			o.allowOther = true
		case key == "default_permissions":
			o.defaultPerms = true
		case key == "ro":
			o.readOnly = true
		case key == "rw":
			o.readOnly = false
		case key == "debug":
			o.debug = true
		case key == "attr_timeout" && hasVal:
			o.attrTimeout, err = parseSeconds(val)
		case key == "entry_timeout" && hasVal:
			o.entryTimeout, err = parseSeconds(val)
		case key == "negative_timeout" && hasVal:
			o.negativeTimeout, err = parseSeconds(val)
		case key == "buffer_size" && hasVal:
			err = o.bufferSize.Set(val)
		case key == "metrics" && hasVal:
			o.metricsListen = val
		case key == "log" && hasVal:
			o.logFile = val
		case key == "addr" && hasVal:
			*addr = val
		case genericMountOptions[key] || strings.HasPrefix(key, "x-") || key == "comment":
		default:
			return fmt.Errorf("mount: unknown option %q", opt)
		}
		if err != nil {
			return fmt.Errorf("mount: option %q: %w", opt, err)
		}
	}
	return nil
}

// parseSeconds reads a timeout as FUSE file systems write it (seconds,
// possibly fractional) or as a Go duration.
func parseSeconds(v string) (time.Duration, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return d, nil
	}
	return time.ParseDuration(v + "s")
}

// mountHelperArgs turns mount(8)'s call of the helper, `mount.canopy SPEC
// DIR [-sfnv] [-o OPTIONS] [-t TYPE]`, into canopy's arguments: a
// background mount of SPEC (a server or router address, with or without
// canopy://) at DIR.
func mountHelperArgs(args []string) ([]string, error) {
	var pos []string
	opts := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || a == "-t":
			if i+1 >= len(args) {
				return nil, fmt.Errorf("%s: %s needs a value", mountHelperName, a)
			}
			if a == "-o" {
				opts = args[i+1]
			}
			i++
		case strings.HasPrefix(a, "-o"):
			opts = a[2:]
		case strings.HasPrefix(a, "-t"):
		case a == "-s" || a == "-f" || a == "-n" || a == "-v" || a == "-sn" || a == "-nv":
			// sloppy, fake, no mtab, verbose: nothing to do
		case strings.HasPrefix(a, "-"):
			return nil, fmt.Errorf("%s: unknown flag %s", mountHelperName, a)
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return nil, fmt.Errorf("usage: %s ADDR MOUNTPOINT [-o OPTIONS]", mountHelperName)
	}
	spec := strings.TrimPrefix(pos[0], "canopy://")
	out := []string{"--addr", spec, "mount", "-d"}
	if opts != "" {
		out = append(out, "-o", opts)
	}
	return append(out, "--", pos[1]), nil
}

// calledAsMountHelper reports whether the process runs as mount.canopy.
func calledAsMountHelper() bool { return filepath.Base(os.Args[0]) == mountHelperName }
