import { Command } from 'commander'
import { registerCommands } from './commands.js'
import { CliError } from './connection.js'

/**
 * The operator's command line: each command is one call to the operator API of a running service
 * (operator.md section 2). Run as `npm run cli -- <command>`; `--help` lists the commands.
 */
function buildProgram(): Command {
  const program = new Command('npm run cli --')
    .description('operate a running userdata service through its operator API')
    .option('--url <url>', 'service base URL (default: $PUBLIC_URL or http://127.0.0.1:3000)')
    .option('--admin-token <token>', 'operator token (default: $ADMIN_TOKEN or the file $DATA_DIR/admin-token)')
    .option('--json', 'print the server response as JSON, for scripts')
    .showHelpAfterError()
  registerCommands(program)
  return program
}

buildProgram()
  .parseAsync(process.argv)
  .catch((e: unknown) => {
    if (!(e instanceof CliError)) throw e
    console.error(`error: ${e.message}`)
    for (const d of e.details) console.error(`  ${d}`)
    process.exitCode = e.exitCode
  })
