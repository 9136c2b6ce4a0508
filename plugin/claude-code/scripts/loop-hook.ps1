# for-loop's launcher for PowerShell: what scripts/loop-hook does, for a Windows machine without Git
# Bash, where Claude Code runs a hook's command through PowerShell (pwsh, or Windows PowerShell 5.1)
# instead of bash. hooks/hooks.json's commands read as bash in bash and as PowerShell in PowerShell;
# the PowerShell half reads this file and runs it with the hook's arguments.
#
# Places searched, first found wins, as in scripts/loop-hook:
#   1. $env:FOR_LOOP_BIN, when it is an absolute path;
#   2. only in a checkout (no bin\SHA256SUMS, a Cargo.toml at the plugin root or two folders up):
#      that tree's target\release and target\debug;
#   3. $env:CARGO_HOME\bin, or .cargo\bin in the user's profile, where `cargo install` puts it;
#   4. only in a release (bin\SHA256SUMS here): bin\windows-<arch>\loop-hook.exe, run only when its
#      SHA-256 matches bin\SHA256SUMS;
#   5. only without bin\SHA256SUMS: PATH, skipping relative entries and the current folder (a
#      project the agent can write to).
# Nothing here may trap a session: a hook whose binary is missing or refused lets the stop
# happen, with one line when this session has a loop. Any other command prints what to do.

$pluginVersion = '0.1.0'
$root = Split-Path -Parent (Split-Path -Parent $launcher)
$sums = Join-Path $root 'bin\SHA256SUMS'
$env:FOR_LOOP_PLUGIN_VERSION = $pluginVersion

function Test-Absolute([string] $path) {
    return $path -match '^[A-Za-z]:[\\/]' -or $path -match '^[\\/]{2}'
}

# Runs PATH (or PATH.exe) when it is a file, passing this hook's stdin through, and exits with its
# exit code.
function Invoke-Binary([string] $path, [string] $source) {
    foreach ($exe in @($path, "$path.exe")) {
        if ((Test-Path -LiteralPath $exe -PathType Leaf) -and $exe -like '*.exe') {
            $env:FOR_LOOP_BIN_SOURCE = $source
            & $exe @hookArgs
            exit $LASTEXITCODE
        }
    }
}

if ($env:FOR_LOOP_BIN -and (Test-Absolute $env:FOR_LOOP_BIN)) { Invoke-Binary $env:FOR_LOOP_BIN 'FOR_LOOP_BIN' }
if (-not (Test-Path -LiteralPath $sums)) {
    foreach ($checkout in @($root, (Join-Path $root '..\..'))) {
        if (Test-Path -LiteralPath (Join-Path $checkout 'Cargo.toml')) {
            Invoke-Binary (Join-Path $checkout 'target\release\loop-hook') 'checkout'
            Invoke-Binary (Join-Path $checkout 'target\debug\loop-hook') 'checkout'
        }
    }
}
$cargoHome = if ($env:CARGO_HOME) { $env:CARGO_HOME } elseif ($env:USERPROFILE) { Join-Path $env:USERPROFILE '.cargo' } else { '' }
if ($cargoHome -and (Test-Absolute $cargoHome)) { Invoke-Binary (Join-Path $cargoHome 'bin\loop-hook') 'cargo' }

$refused = ''
if (Test-Path -LiteralPath $sums) {
    $arch = if ($env:PROCESSOR_ARCHITECTURE -eq 'ARM64') { 'aarch64' } else { 'x86_64' }
    $platform = "windows-$arch"
    $binary = Join-Path $root "bin\$platform\loop-hook.exe"
    $expected = ''
    foreach ($line in Get-Content -LiteralPath $sums) {
        $fields = $line -split '\s+', 2
        if ($fields.Count -eq 2 -and $fields[1].TrimStart('*') -eq "$platform/loop-hook.exe") { $expected = $fields[0] }
    }
    if (-not $expected -or -not (Test-Path -LiteralPath $binary -PathType Leaf)) {
        $refused = "for-loop: this plugin ships no loop-hook binary for $platform. Build one with ``cargo install --locked --path <a for-loop checkout>`` (needs Rust), then try again."
    } elseif ((Get-FileHash -Algorithm SHA256 -LiteralPath $binary).Hash -ne $expected.ToUpperInvariant()) {
        $refused = "for-loop: the shipped loop-hook binary for $platform does not match its SHA-256 checksum, so it was not run. Reinstall the plugin (claude plugin uninstall for-loop@for-loop, then claude plugin install for-loop@for-loop)."
    } else {
        Invoke-Binary $binary 'shipped'
    }
} else {
    $here = (Get-Location).ProviderPath
    foreach ($dir in ($env:PATH -split ';')) {
        if (-not $dir -or -not (Test-Absolute $dir)) { continue }
        $full = [IO.Path]::GetFullPath($dir).TrimEnd('\')
        if ($full -eq $here.TrimEnd('\') -or $full.StartsWith($here.TrimEnd('\') + '\', [StringComparison]::OrdinalIgnoreCase)) { continue }
        Invoke-Binary (Join-Path $full 'loop-hook') 'PATH'
    }
}

# Nothing runnable: never trap the session, say what to do once.
if (-not $refused) {
    $refused = 'for-loop: the loop-hook binary is not installed. Install it once with: cargo install --locked --path <a for-loop checkout> (needs Rust: https://rustup.rs), or install the for-loop plugin from its marketplace, which ships it; then run the command again.'
}
$subcommand = if ($hookArgs.Count -gt 0) { $hookArgs[0] } else { '' }
if ($subcommand -eq 'stop-hook' -or $subcommand -eq 'stop') {
    # Where loop-hook keeps loops on Windows (its Store::locate).
    $store = if ($env:FOR_LOOP_HOME) { $env:FOR_LOOP_HOME } elseif ($env:XDG_STATE_HOME) { Join-Path $env:XDG_STATE_HOME 'for-loop' } elseif ($env:LOCALAPPDATA) { Join-Path $env:LOCALAPPDATA 'for-loop' } else { Join-Path $env:USERPROFILE '.local\state\for-loop' }
    if ($env:CLAUDE_CODE_SESSION_ID -and (Test-Path -LiteralPath (Join-Path $store "sessions\$($env:CLAUDE_CODE_SESSION_ID)\state.md"))) {
        @{ systemMessage = "$refused This stop is allowed; the loop is paused until then." } | ConvertTo-Json -Compress
    }
} elseif ($subcommand -ne 'guard' -and $subcommand -notlike '*-hook') {
    $refused
}
exit 0
