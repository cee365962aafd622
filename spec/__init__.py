"""The protocol: state, actions, claims and scenarios of the PD KV page lifecycle."""
