"""``attenio config show|save`` and ``attenio registers``."""

from __future__ import annotations

from pathlib import Path

import click

from attenio.app.cli.app import (
    _friendly,
    _load_hw,
    _outputs,
    config_option,
    main,
    preset_option,
)
from attenio.base.fields import dumps_toml
from attenio.base.tomlfile import save_toml


@main.group("config")
def config_group():
    """Show and save hardware configurations."""


@config_group.command("show")
@preset_option
@config_option
@click.option("--toml", "as_toml", is_flag=True, help="Print as TOML instead of a table.")
@_friendly
def config_show(preset, config_file, as_toml):
    """Print a configuration's fields and derived datapath widths."""
    hw = _load_hw(preset, config_file)
    if as_toml:
        click.echo(dumps_toml({"hardware": hw.to_dict()}), nl=False)
        return
    name = config_file or preset or "fpga"
    click.echo(f"hardware config: {name}")
    rows = [(k, v) for k, v in hw.to_dict().items() if k != "numerics"]
    rows += [("macs", hw.macs), ("element_bytes", hw.element_bytes)]
    for k, v in rows:
        click.echo(f"  {k:<22} {v}")
    click.echo("numerics:")
    for k, v in hw.numerics.to_dict().items():
        click.echo(f"  {k:<22} {v}")
    click.echo("derived widths (bits):")
    for k, v in hw.widths().items():
        click.echo(f"  {k:<22} {v}")
    why = hw.rtl_reason()
    click.echo("RTL: " + (f"model only: {why}" if why else
                          "buildable (attenio verilog, simulate, synth)"))


@config_group.command("save")
@preset_option
@config_option
@click.option("-o", "--output", required=True, metavar="FILE", help="Where to write the TOML.")
@_friendly
def config_save(preset, config_file, output):
    """Write a configuration as TOML (edit it, then pass it with --config): a preset as
    ``preset = "NAME"`` with every field below it commented out, to override by uncommenting;
    a --config file resolved, every field."""
    _outputs(output=output)
    hw = _load_hw(preset, config_file)
    if config_file:
        save_toml(output, hw)
    else:
        fields = dumps_toml({"hardware": hw.to_dict()}).splitlines()
        lines = ["[hardware]", f'preset = "{preset or "fpga"}"',
                 "# overrides: uncomment a field and change it (every field is the preset's)"]
        lines += ["# " + x if x and not x.startswith("[hardware]") else x for x in fields[1:]]
        Path(output).write_text("\n".join(lines) + "\n")
    click.echo(f"wrote {output}")


@main.command("registers")
@preset_option
@config_option
@click.option("--header", "header_path", default=None, metavar="FILE",
              help="Write the C header of the register map.")
@_friendly
def registers_cmd(preset, config_file, header_path):
    """Print the AXI4-Lite register map (docs/registers.md) or write its C header."""
    from attenio.contract import registers as csr

    hw = _load_hw(preset, config_file)
    _outputs(header=header_path)
    if header_path:
        Path(header_path).write_text(csr.c_header(hw))
        click.echo(f"wrote {header_path}")
        return
    for r in csr.registers(hw):
        value = f" = 0x{r.value:08X}" if r.kind == "const" else ""
        click.echo(f"  0x{r.offset:03X}  {r.name:<16} {r.kind:<6} {r.doc}{value}")
