import { z } from 'zod'

/** The queue of callback deliveries. */
export const CALLBACK_QUEUE = 'callback'

/** One POST to a customer's callback endpoint. */
export const CallbackJob = z.object({
  workspaceId: z.string(),
  requestId: z.string(),
  exportId: z.string(),
  url: z.string(),
  body: z.record(z.string(), z.unknown()),
})
export type CallbackJob = z.infer<typeof CallbackJob>
