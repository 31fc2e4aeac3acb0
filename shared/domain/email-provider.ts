/**
 * The email provider's own spam and bounce lists (interface.md 4.11 and 4.12). The service keeps
 * its own lists and removes from them first; then it asks the provider to do the same. The
 * addresses are normalized (trimmed, lower-cased) and every requested address is passed, listed
 * by the service or not, since the provider's lists may hold addresses the service never saw.
 * Implementations must be idempotent: a client retrying a failed request calls them again.
 */
export interface EmailProviderLists {
  removeFromSpamList(emails: string[]): Promise<void>
  removeFromBounceList(emails: string[]): Promise<void>
}

/** The default: no provider is connected, so there is nothing to remove beyond our own lists. */
export const noEmailProvider: EmailProviderLists = {
  async removeFromSpamList() {},
  async removeFromBounceList() {},
}
