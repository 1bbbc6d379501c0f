"""The command line's commands, built on click: those a kubectl plugin carries (inspecting), the
operator's (operating) and the sandbox's (sandboxing); `promsched.cli` puts them together."""
