"""The configuration of opencode-memoryd: one TOML file, by default
``$XDG_CONFIG_HOME/opencode-memoryd/config.toml``.

Every key is optional. Sections and keys are checked strictly: an unknown key, a value of
the wrong TOML type or out of range is an error, and every problem in the file is reported
at once, each with its key path.

Modules:

* :mod:`~opencode_memoryd.config.paths`: every path rule: XDG directories, the config
  file, the state and store dirs, ``daemon.json`` and the sockets (``os`` and ``json``
  only: the fast path imports it too);
* :mod:`~opencode_memoryd.config.fields`: field types and the section base class;
* one module per TOML section, named after its table (:mod:`~opencode_memoryd.config.llm`
  for ``[llm]``, ...), each holding that section's model;
* :mod:`~opencode_memoryd.config.schema`: :class:`~opencode_memoryd.config.schema.Config`,
  the whole file;
* :mod:`~opencode_memoryd.config.loader`: reading, validation errors, CLI overrides,
  ``config init``;
* :mod:`~opencode_memoryd.config.identity`: the user identity of the user scope (``[user]
  id``, else a hash of the git e-mail address or the login name);
* :mod:`~opencode_memoryd.config.example`: the commented ``config.example.toml`` and
  ``python -m opencode_memoryd.config.example [--check] [PATH]``.
"""
