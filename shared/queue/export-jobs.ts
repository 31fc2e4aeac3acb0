import { z } from 'zod'

/** The queue of exports. */
export const EXPORT_QUEUE = 'export'

/** Runs one export; its settings live in the `exports` row. */
export const ExportJob = z.object({
  workspaceId: z.string(),
  requestId: z.string(),
  exportId: z.string(),
})
export type ExportJob = z.infer<typeof ExportJob>
