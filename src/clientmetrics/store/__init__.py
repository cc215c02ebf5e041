"""clientmetrics.store: durable client-metrics subscriptions behind one small interface."""

from clientmetrics.store.base import (
    Change,
    ChangeListener,
    ConfigMap,
    StoreError,
    SubscriptionStore,
)
from clientmetrics.store.memory import MemorySubscriptionStore
from clientmetrics.store.sqlite import SqliteSubscriptionStore

__all__ = [
    "Change",
    "ChangeListener",
    "ConfigMap",
    "MemorySubscriptionStore",
    "SqliteSubscriptionStore",
    "StoreError",
    "SubscriptionStore",
]
